// An OCI image's run config (image::ImageConfig: User, WorkingDir, Env) in real boxes: the
// built python recipe image's tree, run as a config written here says, in a jail (and, where
// QEMU can run, a vm under tcg). As host root the jail maps the image's user; as anyone else
// it runs the box as root and says why (BoxInfo::user).
#include <gtest/gtest.h>

#include <csignal>

#include "base/paths.h"
#include "box/backend.h"
#include "box/spares.h"
#include "image/store.h"
#include "jail/jail.h"
#include "testing/box_test_util.h"
#include "tests/box/kernel_test_util.h"

namespace codebox {
namespace {

using namespace std::chrono_literals;

// The real drivers on the options' image, with `config` for its run config.
class ConfigEnv final : public box::BoxEnv {
 public:
  explicit ConfigEnv(image::ImageConfig config) : config_(std::move(config)) {}
  StatusOr<std::unique_ptr<box::Backend>> StartBackend(const BoxOptions& options) override {
    ASSIGN_OR_RETURN(image::ImageInfo image,
                     image::FindImage(base::ImageStores(options.home), options.image));
    image.config = config_;
    return box::StartOnImage(options, image);
  }

 private:
  image::ImageConfig config_;
};

image::ImageConfig AppConfig() {
  image::ImageConfig c;
  c.env = {"PATH=/usr/local/bin:/usr/bin:/bin:/opt/app/bin", "APP_MODE=from-image", "LANG=C.UTF-8"};
  c.working_dir = "/srv/app";  // not in the image: the box makes it
  c.user = "app";
  c.uid = 1000;
  c.gid = 1000;
  c.home = "/home/app";
  return c;
}

std::string Out(Box& box, const std::string& script, const std::string& user = "") {
  auto r = box.Exec({"sh", "-c", script}, {.user = user});
  EXPECT_TRUE(r.ok()) << script << ": " << r.status().ToString();
  if (!r.ok()) return "";
  EXPECT_EQ(r->exit_code, 0) << script << ": " << r->stderr_data;
  return r->stdout_data;
}

TEST(BoxImageConfigTest, AJailRunsAsTheImageUserInItsWorkingDir) {
  ConfigEnv env(AppConfig());
  CODEBOX_MAKE_BOX_OR_SKIP(box, testing::TestBoxOptions(), env);
  EXPECT_EQ(Out(*box, "pwd"), "/srv/app\n");
  EXPECT_EQ(Out(*box, "echo \"$PATH|$APP_MODE\""),
            "/usr/local/bin:/usr/bin:/bin:/opt/app/bin|from-image\n");
  if (!jail::CanMapUser()) {
    // One id only: everything runs as box root, and the box says so.
    EXPECT_EQ(box->info().user.rfind("root (the image's user 1000:1000 (app) cannot be", 0), 0u)
        << box->info().user;
    EXPECT_EQ(Out(*box, "id -u; echo $HOME"), "0\n/root\n");
    return;
  }
  EXPECT_EQ(box->info().user, "1000:1000 (app)");
  EXPECT_EQ(Out(*box, "id -u; id -g; id -G; echo $HOME"), "1000\n1000\n1000\n/home/app\n");
  EXPECT_EQ(Out(*box, "grep -E '^(CapEff|CapPrm|CapBnd):' /proc/self/status"),
            "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n");
  // The workdir is the user's to write, and so is /data; the agent works on files as the user
  // (box root has no CAP_DAC_OVERRIDE to write in the user's directories), so what the host
  // writes is the user's too.
  EXPECT_EQ(Out(*box, "echo made > mine.txt; stat -c %u:%g . mine.txt"), "1000:1000\n1000:1000\n");
  ASSERT_TRUE(box->WriteFile("given.txt", "from the host").ok());
  EXPECT_EQ(Out(*box, "cat given.txt; stat -c %u given.txt"), "from the host1000\n");
  ASSERT_TRUE(box->WriteFile("deep/er/given.txt", "x").ok());
  EXPECT_EQ(Out(*box, "stat -c %u deep deep/er deep/er/given.txt"), "1000\n1000\n1000\n");
  ASSERT_TRUE(box->WriteFile("/data/input.csv", "a,b\n").ok());
  EXPECT_EQ(Out(*box, "echo c,d >> /data/input.csv; cat /data/input.csv"), "a,b\nc,d\n");
  auto back = box->ReadFile("mine.txt");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, "made\n");
  // No way back to root; the agent holds root as its own ids, the user's as its saved and
  // filesystem ones, and no capability.
  auto setuid = box->RunPython("import os\ntry:\n  os.setuid(0)\nexcept OSError as e:\n  print(e)");
  ASSERT_TRUE(setuid.ok()) << setuid.status().ToString();
  EXPECT_EQ(setuid->stdout_data, "[Errno 1] Operation not permitted\n");
  EXPECT_EQ(Out(*box, "grep -E '^(Uid|Gid|CapEff):' /proc/1/status"),
            "Uid:\t0\t0\t1000\t1000\nGid:\t0\t0\t1000\t1000\nCapEff:\t0000000000000000\n");
}

TEST(BoxImageConfigTest, EveryWayOfRunningCodeRunsAsTheUser) {
  if (!jail::CanMapUser()) GTEST_SKIP() << "a jail maps the image's user only for host root";
  ConfigEnv env(AppConfig());
  CODEBOX_MAKE_BOX_OR_SKIP(box, testing::TestBoxOptions(), env);
  const std::string probe = "import os; print(os.getuid(), os.getgid(), os.getcwd())";
  auto cold = box->RunPython(probe);
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();
  EXPECT_EQ(cold->stdout_data, "1000 1000 /srv/app\n") << cold->stderr_data;
  // A program too long for an argument is sent as a file: one the user can read.
  auto big = box->RunPython(probe + "\n#" + std::string(100'000, 'x') + "\n");
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(big->stdout_data, "1000 1000 /srv/app\n") << big->stderr_data;
  EXPECT_EQ(Out(*box, "ls -A /tmp | grep -c codebox-program || true"), "0\n") << "removed after";
  ASSERT_TRUE(box->Prewarm({.python = true, .kernel = true}).ok());
  auto warm = box->RunPython(probe);
  ASSERT_TRUE(warm.ok()) << warm.status().ToString();
  EXPECT_EQ(warm->stdout_data, "1000 1000 /srv/app\n") << warm->stderr_data;
  Execution cell = testing::RunOk(*box, "import os\nprint(os.getuid(), os.getcwd())");
  EXPECT_FALSE(cell.error) << cell.error->value;
  EXPECT_EQ(testing::Joined(cell.stdout_chunks), "1000 /srv/app\n");
}

TEST(BoxImageConfigTest, AWorkingDirWithFilesIsTheCwdAndStaysTheImages) {
  image::ImageConfig config = AppConfig();
  config.working_dir = "/usr/lib/python3";
  config.working_dir_has_files = true;
  ConfigEnv env(config);
  CODEBOX_MAKE_BOX_OR_SKIP(box, testing::TestBoxOptions(), env);
  EXPECT_EQ(Out(*box, "pwd; test -d /usr/lib/python3/dist-packages && echo files"),
            "/usr/lib/python3\nfiles\n");
  EXPECT_NE(Out(*box, "touch here 2>&1 || echo refused").find("refused"), std::string::npos)
      << "the image's files are read-only";
  ASSERT_TRUE(box->WriteFile("out.txt", "x").ok());
  EXPECT_EQ(Out(*box, "cat /work/out.txt"), "x") << "relative paths: the workdir, /work";
  if (jail::CanMapUser()) {
    EXPECT_EQ(Out(*box, "stat -c %u /work"), "1000\n");
  }
}

TEST(BoxImageConfigTest, ASpareJailIsTakenOnlyForTheSameUser) {
  BoxOptions options = testing::TestBoxOptions();
  options.prestart = true;
  image::ImageConfig user_only = AppConfig();
  user_only.working_dir = "";  // the same workdir as the recipe's: only the user differs
  {
    ConfigEnv env(user_only);
    CODEBOX_MAKE_BOX_OR_SKIP(user_box, options, env);  // leaves a spare for the user's config
  }
  CODEBOX_MAKE_BOX_OR_SKIP(root_box, options);  // the recipe's config: not that spare
  EXPECT_EQ(root_box->info().user, "root");
  EXPECT_EQ(Out(*root_box, "id -u; pwd"), "0\n/work\n");
  root_box.reset();
  box::DestroyPrestartedJails();
}

// BoxOptions::user on a recipe image: every recipe image holds `user` (uid 1000, home
// /home/user), as E2B's templates do; an exec may ask for root, and for no one else.
TEST(BoxImageConfigTest, BoxOptionsUserRunsAsTheImagesAccountAndAnExecMayAskForRoot) {
  BoxOptions options = testing::TestBoxOptions();
  options.user = "user";
  options.workdir = "/home/user";
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  auto other = box->Exec({"id", "-u"}, {.user = "nobody"});
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("this box runs as user"), std::string::npos)
      << other.status().ToString();
  if (!jail::CanMapUser()) {
    EXPECT_EQ(box->info().user.rfind("root (", 0), 0u) << box->info().user;
    EXPECT_EQ(Out(*box, "id -u", "user"), "0\n") << "the box's user is root here";
    return;
  }
  EXPECT_EQ(box->info().user, "1000:1000 (user)");
  EXPECT_EQ(Out(*box, "id -un; id -u; pwd; echo $HOME; echo x > f; stat -c %U f"),
            "user\n1000\n/home/user\n/home/user\nuser\n");
  EXPECT_EQ(Out(*box, "id -un", "1000"), "user\n");
  EXPECT_EQ(Out(*box, "id -un; echo $HOME; echo y > /root/r; stat -c %U /root/r", "root"),
            "root\n/root\nroot\n");
  EXPECT_EQ(Out(*box, "cat /root/r 2>&1 || echo denied"),
            "cat: /root/r: Permission denied\ndenied\n");
  // The agent ends the user's processes at their timeout (a jail's root, without CAP_KILL,
  // signals them as the user), and a background one when it is killed.
  auto slow = box->Exec({"sh", "-c", "sleep 30 & sleep 30"}, {.timeout = 1s});
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  EXPECT_TRUE(slow->timed_out);
  EXPECT_LT(slow->duration, 10s);
  auto background = box->Start({"sleep", "60"}, {.background = true});
  ASSERT_TRUE(background.ok()) << background.status().ToString();
  ASSERT_TRUE((*background)->Signal(SIGTERM).ok());
  auto killed = (*background)->Wait();
  ASSERT_TRUE(killed.ok()) << killed.status().ToString();
  EXPECT_EQ(killed->signal, SIGTERM);
  EXPECT_EQ(Out(*box, "cat /proc/[0-9]*/comm | grep -c '^sleep$' || true"), "0\n")
      << "no sleep outlived its exec";
  // The user cannot reach root's processes: neither directly nor through the agent, which
  // ignores the SIGTERM a box process sends it (passed on, it would reach every exec).
  auto root_sleep = box->Start({"sleep", "60"}, {.user = "root", .background = true});
  ASSERT_TRUE(root_sleep.ok()) << root_sleep.status().ToString();
  const std::string root_pid = std::to_string((*root_sleep)->pid());
  auto attack = box->Exec({"sh", "-c",
                           "kill -TERM 1; kill -KILL " + root_pid + " 2>&1; kill -TERM -" +
                               root_pid + " 2>&1; sleep 0.3; cat /proc/" + root_pid + "/comm"});
  ASSERT_TRUE(attack.ok()) << attack.status().ToString();
  EXPECT_NE(attack->stdout_data.find("Operation not permitted"), std::string::npos)
      << attack->stdout_data;
  EXPECT_TRUE(attack->stdout_data.ends_with("sleep\n"))
      << "root's process lives on: " << attack->stdout_data;
  ASSERT_TRUE((*root_sleep)->Kill().ok()) << "the host still ends it";
  auto ended = (*root_sleep)->Wait();
  ASSERT_TRUE(ended.ok()) << ended.status().ToString();
  EXPECT_EQ(ended->signal, SIGKILL);
  // A program sent as a file, run as root in a box of a user.
  auto big =
      box->Exec({"python3", "-c", "import os; print(os.getuid())\n#" + std::string(200'000, 'x')},
                {.user = "root"});
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(big->stdout_data, "0\n") << big->stderr_data;

  options.user = "nosuch";
  auto missing = Box::Create(options);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("user 'nosuch' is not in the image's /etc/passwd"),
            std::string::npos)
      << missing.status().ToString();
}

// A vm box: the agent is the guest's real root, so it becomes the user itself; the workdir is
// made on the guest's overlay. Under tcg this costs a boot (seconds).
TEST(BoxImageConfigTest, AVmRunsAsTheImageUserInItsWorkingDir) {
  BoxOptions options = testing::TestBoxOptions();
  options.driver = DriverKind::kVm;
  options.allow_emulation = true;
  options.exec_timeout = 60s;
  ConfigEnv env(AppConfig());
  CODEBOX_MAKE_BOX_OR_SKIP(box, options, env);
  EXPECT_EQ(box->info().user, "1000:1000 (app)");
  EXPECT_EQ(Out(*box,
                "id -u; id -g; id -G; pwd; echo \"$APP_MODE|$HOME\"; echo x > f; "
                "stat -c %u:%g . f"),
            "1000\n1000\n1000\n/srv/app\nfrom-image|/home/app\n1000:1000\n1000:1000\n");
  EXPECT_EQ(Out(*box, "id -u; echo $HOME", "root"), "0\n/root\n");
  // The agent is root there: what the host writes is made the user's, with the directories
  // made for it, so the user's programs may change it.
  ASSERT_TRUE(box->WriteFile("made/for/given.txt", "from the host").ok());
  EXPECT_EQ(Out(*box,
                "stat -c %u:%g made made/for made/for/given.txt; echo more >> "
                "made/for/given.txt"),
            "1000:1000\n1000:1000\n1000:1000\n");
}

}  // namespace
}  // namespace codebox
