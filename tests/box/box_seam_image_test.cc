// What an image's run config (image::ImageConfig: an OCI image's Env, WorkingDir, User) makes
// of a box, through the BoxEnv seam: the environment every exec gets, where it starts, the
// workdir, and the user every request names (Exec, RunPython cold and warm, RunCode's kernel,
// the workdir's mkdir). A relay records each request and strips its user before the
// in-process agent sees it: that agent runs as the test, which becomes no one else.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <vector>

#include "base/io.h"
#include "seam_fixture.h"

namespace codebox::testing {
namespace {

using protocol::Json;
using protocol::msg::User;

// The requests the host sent, as JSON, in order.
class Requests {
 public:
  // Records and strips; with `work_root`, box paths under /work go to work_root + path on the
  // host instead (the default workdir must not be made on the test's machine).
  Tamper Recorder(std::string work_root = "") {
    return [this, work_root](Direction dir, protocol::Frame& frame) {
      if (dir != Direction::kToAgent || RequestOf(frame).empty()) return Verdict::kForward;
      EditControl(frame, [&](Json& j) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          seen_.push_back(j);
        }
        j.erase("user");
        j.erase("owner");
        if (work_root.empty()) return;
        for (const char* field : {"path", "cwd"}) {
          if (!j.contains(field)) continue;
          std::string path = j[field].get<std::string>();
          if (path == "/work" || path.starts_with("/work/")) j[field] = work_root + path;
        }
      });
      return Verdict::kForward;
    };
  }

  std::vector<Json> Of(const std::string& op) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Json> out;
    for (const Json& j : seen_) {
      if (j["op"] == op) out.push_back(j);
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<Json> seen_;
};

std::optional<User> UserOf(const Json& j, const char* field) {
  if (!j.contains(field)) return std::nullopt;
  return User{j[field]["uid"].get<uint32_t>(), j[field]["gid"].get<uint32_t>()};
}

image::ImageConfig AppImage(const std::string& working_dir) {
  image::ImageConfig c;
  c.env = {"PATH=/usr/local/bin:/usr/bin:/bin:/opt/img/bin", "IMG=from-image", "OVER=image"};
  c.working_dir = working_dir;
  c.user = "app";
  c.uid = 1000;
  c.gid = 1000;
  c.home = "/home/app";
  return c;
}

constexpr char kEnvProbe[] = "pwd; echo \"$PATH|$IMG|$OVER|$HOME|$X\"";

class SeamImageTest : public SeamTest {
 protected:
  void SetUp() override {
    SeamTest::SetUp();
    options_.workdir = BoxOptions{}.workdir;  // the default: the image's WorkingDir may win
    options_.env = {{"OVER", "box"}};
  }
  Requests requests_;
};

TEST_F(SeamImageTest, AnEmptyWorkingDirIsTheWorkdirAndEveryExecRunsAsTheUser) {
  const std::string app = tmp_ + "/srv/app";
  env_.image_config = AppImage(app);
  env_.tamper = requests_.Recorder();
  auto box = Create();
  ASSERT_NE(box, nullptr);
  EXPECT_EQ(box->info().user, "1000:1000 (app)");
  EXPECT_TRUE(std::filesystem::is_directory(app)) << "the WorkingDir is the workdir, made";
  auto mkdirs = requests_.Of("mkdir");
  ASSERT_EQ(mkdirs.size(), 1u);
  EXPECT_EQ(mkdirs[0]["path"], app);
  EXPECT_EQ(UserOf(mkdirs[0], "owner"), (User{1000, 1000})) << "the workdir is the user's";

  auto r = box->Exec({"sh", "-c", kEnvProbe}, WithEnv("X", "exec"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data,
            app + "\n/usr/local/bin:/usr/bin:/bin:/opt/img/bin|from-image|box|/home/app|exec\n");
  ASSERT_TRUE(box->WriteFile("rel.txt", "x").ok());
  EXPECT_TRUE(std::filesystem::exists(app + "/rel.txt")) << "relative paths: the workdir";

  auto cold = box->RunPython("import os; print(os.getcwd(), os.environ['HOME'])");
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();
  EXPECT_EQ(cold->stdout_data, app + " /home/app\n");
  // A program too long for an argument goes as a file the user can read, and the host removes
  // it after (the user cannot unlink a root file in sticky /tmp).
  std::string big = "x = 1\n" + std::string(100'000, '#') + "\nprint('big', x)\n";
  auto long_program = box->RunPython(big);
  ASSERT_TRUE(long_program.ok()) << long_program.status().ToString();
  EXPECT_EQ(long_program->stdout_data, "big 1\n") << long_program->stderr_data;
  auto writes = requests_.Of("write_file");
  ASSERT_FALSE(writes.empty());
  const Json& program = writes.back();
  EXPECT_EQ(program["mode"], 0644);
  auto removes = requests_.Of("remove");
  ASSERT_EQ(removes.size(), 1u);
  EXPECT_EQ(removes[0]["path"], program["path"]);
  EXPECT_FALSE(std::filesystem::exists(program["path"].get<std::string>()));

  ASSERT_TRUE(box->Prewarm({.python = true, .kernel = false}).ok());
  auto warm = box->RunPython("import os; print(os.getcwd())");
  ASSERT_TRUE(warm.ok()) << warm.status().ToString();
  EXPECT_EQ(warm->stdout_data, app + "\n");
  (void)box->RunCode("1");  // the host's python3 may lack IPython: the request is what counts

  auto execs = requests_.Of("exec");
  ASSERT_GE(execs.size(), 5u) << "exec, cold and long RunPython, the waiter, the kernel";
  bool kernel_seen = false, waiter_seen = false;
  for (const Json& e : execs) {
    EXPECT_EQ(UserOf(e, "user"), (User{1000, 1000})) << e.dump();
    EXPECT_EQ(e["env"]["PATH"], "/usr/local/bin:/usr/bin:/bin:/opt/img/bin") << e.dump();
    EXPECT_EQ(e["cwd"], app);
    kernel_seen |= e["env"].contains("IPYTHONDIR");
    waiter_seen |= e["stdin"] == "stream" && !e["env"].contains("IPYTHONDIR");
  }
  EXPECT_TRUE(kernel_seen) << "RunCode's kernel";
  EXPECT_TRUE(waiter_seen) << "Prewarm's waiting python3";
}

TEST_F(SeamImageTest, AWorkingDirWithFilesIsWhereExecsStartAndTheWorkdirStays) {
  const std::string app = tmp_ + "/app";
  std::filesystem::create_directories(app);
  ASSERT_TRUE(base::WriteFile(app + "/main.txt", "the image's file\n").ok());
  image::ImageConfig config = AppImage(app);
  config.working_dir_has_files = true;
  env_.image_config = config;
  env_.tamper = requests_.Recorder(tmp_);
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto mkdirs = requests_.Of("mkdir");
  ASSERT_EQ(mkdirs.size(), 1u);
  EXPECT_EQ(mkdirs[0]["path"], "/work") << "the workdir stays";
  EXPECT_EQ(UserOf(mkdirs[0], "owner"), (User{1000, 1000}));

  auto r = box->Exec({"sh", "-c", "pwd; cat main.txt"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, app + "\nthe image's file\n");
  ASSERT_TRUE(box->WriteFile("out.txt", "x").ok());
  EXPECT_EQ(requests_.Of("write_file").back()["path"], "/work/out.txt");
  EXPECT_TRUE(std::filesystem::exists(tmp_ + "/work/out.txt"));
  ExecOptions relative;
  relative.cwd = "sub";
  (void)box->Exec({"true"}, relative);
  EXPECT_EQ(requests_.Of("exec").back()["cwd"], "/work/sub") << "relative: under the workdir";
}

TEST_F(SeamImageTest, AWorkdirTheCallerSetWins) {
  options_.workdir = tmp_ + "/mine";
  env_.image_config = AppImage(tmp_ + "/srv/app");
  env_.tamper = requests_.Recorder();
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto r = box->Exec({"pwd"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, tmp_ + "/mine\n");
  EXPECT_FALSE(std::filesystem::exists(tmp_ + "/srv/app"));
}

TEST_F(SeamImageTest, ADriverThatCannotSwitchRunsAsRootAndSaysSo) {
  env_.image_config = AppImage(tmp_ + "/srv/app");
  env_.can_switch_user = false;
  env_.tamper = requests_.Recorder();
  auto box = Create();
  ASSERT_NE(box, nullptr);
  EXPECT_EQ(box->info().user,
            "root (the image's user 1000:1000 (app) cannot be: a jail without root on the host "
            "maps only one id)");
  auto r = box->Exec({"sh", "-c", kEnvProbe});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, tmp_ +
                                "/srv/app\n/usr/local/bin:/usr/bin:/bin:/opt/img/bin|"
                                "from-image|box|/root|\n");
  for (const Json& e : requests_.Of("exec")) EXPECT_FALSE(e.contains("user")) << e.dump();
  for (const Json& m : requests_.Of("mkdir")) EXPECT_FALSE(m.contains("owner")) << m.dump();
}

TEST_F(SeamImageTest, ARecipeImageNamesNoUserAnywhere) {
  options_.workdir = tmp_ + "/work";
  env_.tamper = requests_.Recorder();
  auto box = Create();
  ASSERT_NE(box, nullptr);
  EXPECT_EQ(box->info().user, "root");
  auto r = box->Exec({"sh", "-c", "echo $HOME; pwd"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "/root\n" + tmp_ + "/work\n");
  std::string big = std::string(100'000, '#') + "\nprint('big')\n";
  auto long_program = box->RunPython(big);
  ASSERT_TRUE(long_program.ok()) << long_program.status().ToString();
  EXPECT_EQ(long_program->stdout_data, "big\n");
  EXPECT_EQ(requests_.Of("write_file").back()["mode"], 0600) << "root's program file, as before";
  EXPECT_TRUE(requests_.Of("remove").empty()) << "it removes itself before it runs";
  for (const Json& e : requests_.Of("exec")) EXPECT_FALSE(e.contains("user")) << e.dump();
  for (const Json& m : requests_.Of("mkdir")) EXPECT_FALSE(m.contains("owner")) << m.dump();
}

TEST_F(SeamImageTest, AnImageEnvironmentThatCannotBeIsACreateError) {
  image::ImageConfig config;
  config.env = {"NOEQUALS"};
  env_.image_config = config;
  auto box = box::CreateBox(options_, env_);
  ASSERT_FALSE(box.ok());
  EXPECT_EQ(box.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(box.status().message().find("create box: image python: its environment: entry "
                                        "'NOEQUALS' is not NAME=VALUE"),
            std::string::npos)
      << box.status().ToString();
}

}  // namespace
}  // namespace codebox::testing
