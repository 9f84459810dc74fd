// Store and builder tests on a temp store, with fake debootstrap and chroot programs so that
// no network, root or real Debian tree is needed.
#include "image/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/io.h"
#include "image/build_steps.h"
#include "image/recipe.h"

namespace codebox::image {
namespace {

// Makes ROOTFS ($4) look like a minbase tree, including a dpkg status the real dpkg-query reads.
constexpr char kFakeDebootstrap[] = R"(#!/bin/sh
set -e
root="$4"
echo "I: Retrieving InRelease"
echo "I: Retrieving base-files 12.4"
mkdir -p "$root/etc" "$root/usr/sbin" "$root/var/lib/dpkg" "$root/var/lib/apt/lists/partial" \
  "$root/usr/share/doc/base-files" "$root/usr/share/man/man1" "$root/usr/share/locale/de" \
  "$root/var/cache/apt/archives/partial" "$root/tmp"
printf 'Package: base-files\nStatus: install ok installed\nVersion: 12.4\nArchitecture: amd64\n\n' \
  > "$root/var/lib/dpkg/status"
echo copyright > "$root/usr/share/doc/base-files/copyright"
echo changelog > "$root/usr/share/doc/base-files/changelog.gz"
echo man > "$root/usr/share/man/man1/ls.1.gz"
echo alias > "$root/usr/share/locale/locale.alias"
echo list > "$root/var/lib/apt/lists/x_Packages"
echo deb > "$root/var/cache/apt/archives/x.deb"
echo "I: Configuring base-files..."
readlink /proc/$$/fd/3 > "$root/lock-fd" || true
echo "I: Base system installed successfully."
)";

constexpr char kFailingDebootstrap[] = R"(#!/bin/sh
mkdir -p "$4/etc" && echo half > "$4/etc/half-written"
echo "I: Retrieving InRelease"
echo "E: Failed getting release file http://mirror.example.org/debian/dists/bookworm/Release"
exit 1
)";

// Dies of SIGINT halfway, as debootstrap does when the user presses Ctrl-C.
constexpr char kInterruptedDebootstrap[] = R"(#!/bin/sh
mkdir -p "$4/etc" && echo half > "$4/etc/half-written"
kill -INT $$
sleep 5
)";

// Records its arguments in the tree and answers like apt-get.
constexpr char kFakeChroot[] = R"(#!/bin/sh
root="$1"; shift
case "$1" in
  useradd) echo "$@" > "$root/useradd-args"; exit 0 ;;
esac
echo "$@" > "$root/apt-args"
test -x "$root/usr/sbin/policy-rc.d" && echo yes > "$root/policy-rc.d-was-there"
echo "Get:1 http://mirror.example.org/debian bookworm/main amd64 python3 3.11 [1 kB]"
echo "Setting up python3 (3.11) ..."
)";

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/codebox-store-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    home_ = root_ + "/home";
    ASSERT_TRUE(base::MakeDirs(root_ + "/recipes/python").ok());
    ASSERT_TRUE(base::MakeDirs(root_ + "/recipes/python-data").ok());
    WriteRecipe("python", "description=test python\npackages=python3\n");
    WriteRecipe("python-data", "packages=python3 python3-numpy\n");
    ::setenv("CODEBOX_IMAGES", (root_ + "/recipes").c_str(), 1);
    options_.mirror = "http://mirror.example.org/debian";
    options_.debootstrap = Script("debootstrap", kFakeDebootstrap);
    options_.chroot = Script("chroot", kFakeChroot);
    options_.require_root = false;
  }
  void TearDown() override {
    ::unsetenv("CODEBOX_IMAGES");
    ASSERT_TRUE(base::RemoveTree(root_).ok());
  }

  void WriteRecipe(const std::string& name, const std::string& text) {
    ASSERT_TRUE(base::WriteFile(root_ + "/recipes/" + name + "/recipe", text).ok());
  }
  std::string Script(const std::string& name, const char* text) {
    std::string path = root_ + "/" + name;
    EXPECT_TRUE(base::WriteFile(path, text).ok());
    ::chmod(path.c_str(), 0755);
    return path;
  }
  Recipe Load(const std::string& name) {
    auto r = LoadRecipe(name);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return *r;
  }
  StatusOr<ImageInfo> Build(const std::string& name, const BuildOptions& options) {
    return BuildIn(home_, name, options);
  }
  StatusOr<ImageInfo> BuildIn(const std::string& home, const std::string& name,
                              const BuildOptions& options) {
    lines_.clear();
    return BuildImage(
        home, Load(name), [&](const std::string& l) { lines_.push_back(l); }, options);
  }
  // Entries of images/ other than ids and by-name: what a failed build might leave behind.
  std::vector<std::string> Leftovers() {
    std::vector<std::string> found;
    if (DIR* d = ::opendir((home_ + "/images").c_str())) {
      while (struct dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n.starts_with(".tmp")) found.push_back(n);
      }
      ::closedir(d);
    }
    return found;
  }

  std::string root_, home_;
  BuildOptions options_;
  std::vector<std::string> lines_;
};

TEST_F(StoreTest, BuildsFindsListsAndRemoves) {
  EXPECT_EQ(FindImage(home_, "python").status().message(),
            "image 'python' is not built in " + home_ +
                "; run: " + (::geteuid() == 0 ? "" : "sudo env ") + "CODEBOX_HOME=" + home_ +
                " codebox image build python" +
                (::geteuid() == 0 ? ""
                                  : " (building needs root: debootstrap creates device nodes "
                                    "and files owned by other users)"));
  auto built = Build("python", options_);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  std::string id = ImageId(Load("python"));
  EXPECT_EQ(built->id, id);
  EXPECT_EQ(built->rootfs, home_ + "/images/" + id + "/rootfs");

  // The tree: mount points, hostname, policy-rc.d gone, apt got --no-install-recommends.
  const std::string& r = built->rootfs;
  EXPECT_TRUE(base::PathExists(r + "/work"));
  EXPECT_TRUE(base::PathExists(r + "/.codebox"));
  EXPECT_EQ(*base::ReadFile(r + "/etc/hostname"), "codebox\n");
  EXPECT_FALSE(base::PathExists(r + "/usr/sbin/policy-rc.d"));
  EXPECT_FALSE(base::PathExists(r + "/etc/resolv.conf"));
  EXPECT_TRUE(base::PathExists(r + "/policy-rc.d-was-there"));
  EXPECT_EQ(*base::ReadFile(r + "/apt-args"),
            "apt-get install -y -q --no-install-recommends python3\n");
  // The box user, added after the packages.
  EXPECT_EQ(*base::ReadFile(r + "/useradd-args"),
            "useradd --uid 1000 --user-group --create-home --shell /bin/bash user\n");
  // The tools hold the build's lock (fd 3, on the temp dir), so an orphan keeps its tree.
  EXPECT_NE(base::ReadFile(r + "/lock-fd")->find("/images/.tmp-" + id + "-"), std::string::npos);
  // Stripped, licences kept.
  EXPECT_TRUE(base::PathExists(r + "/usr/share/doc/base-files/copyright"));
  EXPECT_FALSE(base::PathExists(r + "/usr/share/doc/base-files/changelog.gz"));
  EXPECT_FALSE(base::PathExists(r + "/usr/share/man/man1"));
  EXPECT_FALSE(base::PathExists(r + "/usr/share/locale/de"));
  EXPECT_TRUE(base::PathExists(r + "/usr/share/locale/locale.alias"));
  EXPECT_FALSE(base::PathExists(r + "/var/lib/apt/lists/x_Packages"));
  EXPECT_FALSE(base::PathExists(r + "/var/cache/apt/archives/x.deb"));

  auto record = ReadManifest(built->dir);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_EQ(record->info.name, "python");
  EXPECT_EQ(record->description, "test python");
  EXPECT_EQ(record->mirror, "http://mirror.example.org/debian");
  ASSERT_EQ(record->packages.size(), 1u);
  EXPECT_EQ(record->packages[0], (std::pair<std::string, std::string>{"base-files", "12.4"}));
  EXPECT_GT(record->info.size_bytes, 0u);
  EXPECT_EQ(record->info.built_at.size(), 20u);  // 2025-01-02T03:04:05Z

  auto found = FindImage(home_, "python");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->id, id);
  ASSERT_EQ(ListImages(home_).size(), 1u);
  EXPECT_TRUE(Leftovers().empty());

  // Progress was summarized, not echoed line by line.
  bool saw_debootstrap = false, saw_apt = false;
  for (const std::string& l : lines_) {
    saw_debootstrap |= l.find("debootstrap: retrieving packages") != std::string::npos;
    saw_apt |= l.find("apt-get: downloading python3") != std::string::npos;
  }
  EXPECT_TRUE(saw_debootstrap && saw_apt);

  ASSERT_TRUE(RemoveImage(home_, "python").ok());
  EXPECT_EQ(FindImage(home_, "python").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(ListImages(home_).empty());
  EXPECT_FALSE(base::PathExists(home_ + "/images/by-name/python"));
  EXPECT_EQ(RemoveImage(home_, "python").code(), StatusCode::kNotFound);
}

TEST_F(StoreTest, UnchangedRecipeIsSkippedUnlessForced) {
  ASSERT_TRUE(Build("python", options_).ok());
  BuildOptions failing = options_;
  failing.debootstrap = Script("debootstrap-fail", kFailingDebootstrap);
  auto again = Build("python", failing);  // would fail if it ran debootstrap
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_EQ(lines_[0], "image python is up to date (" + again->id + ")");

  failing.force = true;
  EXPECT_FALSE(Build("python", failing).ok());
  EXPECT_TRUE(FindImage(home_, "python").ok()) << "a failed --force rebuild keeps the old image";
  BuildOptions forced = options_;
  forced.force = true;
  ASSERT_TRUE(Build("python", forced).ok());
  EXPECT_EQ(ListImages(home_).size(), 1u);
  EXPECT_TRUE(Leftovers().empty());
}

TEST_F(StoreTest, FailedBuildLeavesNothing) {
  BuildOptions failing = options_;
  failing.debootstrap = Script("debootstrap-fail", kFailingDebootstrap);
  auto built = Build("python", failing);
  ASSERT_FALSE(built.ok());
  // The error says which tool failed and shows its last output.
  EXPECT_NE(built.status().message().find("exited with status 1"), std::string::npos);
  EXPECT_NE(built.status().message().find("Failed getting release file"), std::string::npos);
  EXPECT_TRUE(Leftovers().empty());
  EXPECT_TRUE(ListImages(home_).empty());
  EXPECT_EQ(FindImage(home_, "python").status().code(), StatusCode::kNotFound);
}

TEST_F(StoreTest, InterruptedBuildLeavesNothing) {
  BuildOptions interrupted = options_;
  interrupted.debootstrap = Script("debootstrap-int", kInterruptedDebootstrap);
  auto built = Build("python", interrupted);
  ASSERT_FALSE(built.ok());
  EXPECT_NE(built.status().message().find("killed by signal 2"), std::string::npos)
      << built.status().message();
  EXPECT_TRUE(Leftovers().empty());
  EXPECT_EQ(FindImage(home_, "python").status().code(), StatusCode::kNotFound);
}

TEST_F(StoreTest, KilledBuildIsNotTakenForWholeAndIsCleanedNextTime) {
  // A build killed with SIGKILL leaves its temp dir; its pid is then dead.
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  std::string id = ImageId(Load("python"));
  std::string stale = home_ + "/images/.tmp-" + id + "-" + std::to_string(child);
  ASSERT_TRUE(base::MakeDirs(stale + "/rootfs/etc").ok());
  ASSERT_TRUE(base::WriteFile(stale + "/manifest.json", "{}").ok());
  EXPECT_EQ(FindImage(home_, "python").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(ListImages(home_).empty());

  auto built = Build("python", options_);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_FALSE(base::PathExists(stale));
  EXPECT_TRUE(Leftovers().empty());
}

TEST_F(StoreTest, OrphanedToolKeepsItsTempDir) {
  // The build that made this dir is dead, but a tool it started still holds the lock.
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  std::string id = ImageId(Load("python"));
  std::string busy = home_ + "/images/.tmp-" + id + "-" + std::to_string(child);
  ASSERT_TRUE(base::MakeDirs(busy).ok());
  int fd = ::open(busy.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  EXPECT_EQ(Build("python", options_).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(base::PathExists(busy));
  ::close(fd);
  ASSERT_TRUE(Build("python", options_).ok());
  EXPECT_FALSE(base::PathExists(busy));
}

TEST_F(StoreTest, RunningBuildOfSameImageIsNotRaced) {
  std::string id = ImageId(Load("python"));
  // pid 1 is alive: this looks like another build in progress.
  ASSERT_TRUE(base::MakeDirs(home_ + "/images/.tmp-" + id + "-1").ok());
  auto built = Build("python", options_);
  EXPECT_EQ(built.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(base::PathExists(home_ + "/images/.tmp-" + id + "-1"));
}

TEST_F(StoreTest, FindImageErrors) {
  auto unknown = FindImage(home_, "ruby");
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("python, python-data"), std::string::npos)
      << unknown.status().message();
  EXPECT_EQ(FindImage(home_, "../etc").status().code(), StatusCode::kInvalidArgument);

  // Edited recipe: the old build no longer counts as the image.
  ASSERT_TRUE(Build("python", options_).ok());
  WriteRecipe("python", "packages=python3 python3-venv\n");
  auto stale = FindImage(home_, "python");
  EXPECT_EQ(stale.status().code(), StatusCode::kNotFound);
  EXPECT_NE(stale.status().message().find("codebox image build python"), std::string::npos);
  EXPECT_NE(stale.status().message().find("recipe changed"), std::string::npos);
  // With its recipe gone, the newest build of the name still serves.
  ASSERT_TRUE(base::RemoveTree(root_ + "/recipes/python").ok());
  EXPECT_TRUE(FindImage(home_, "python").ok());
}

TEST_F(StoreTest, NeedsRootUnlessTold) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root";
  BuildOptions as_user = options_;
  as_user.require_root = true;
  auto built = Build("python", as_user);
  EXPECT_EQ(built.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(built.status().message().find("root"), std::string::npos);
}

using Kind = base::ImageStore::Kind;

TEST(ImageStoresTest, SearchOrder) {
  base::StoreEnv user{.override_home = "",
                      .codebox_home = "",
                      .xdg_data_home = "",
                      .home = "/home/u",
                      .root = false};
  auto stores = base::ImageStoresFor(user);
  ASSERT_EQ(stores.size(), 2u);
  EXPECT_EQ(stores[0].path, "/home/u/.local/share/codebox");
  EXPECT_EQ(stores[0].kind, Kind::kUser);
  EXPECT_EQ(stores[1].path, "/var/lib/codebox");
  EXPECT_EQ(stores[1].kind, Kind::kSystem);

  base::StoreEnv xdg = user;
  xdg.xdg_data_home = "/x";
  EXPECT_EQ(base::ImageStoresFor(xdg)[0].path, "/x/codebox");

  base::StoreEnv root = user;
  root.root = true;
  stores = base::ImageStoresFor(root);
  ASSERT_EQ(stores.size(), 1u);
  EXPECT_EQ(stores[0].path, "/var/lib/codebox");

  // An explicit home ($CODEBOX_HOME or BoxOptions::home, which wins) is the only store.
  base::StoreEnv env_home = user;
  env_home.codebox_home = "/env";
  stores = base::ImageStoresFor(env_home);
  ASSERT_EQ(stores.size(), 1u);
  EXPECT_EQ(stores[0].path, "/env");
  EXPECT_EQ(stores[0].kind, Kind::kExplicit);
  env_home.override_home = "/opt";
  env_home.root = true;
  stores = base::ImageStoresFor(env_home);
  ASSERT_EQ(stores.size(), 1u);
  EXPECT_EQ(stores[0].path, "/opt");
}

TEST_F(StoreTest, UserStoreFirstThenSystemStore) {
  const std::string user = root_ + "/user", system = root_ + "/system";
  const std::vector<base::ImageStore> both = {{user, Kind::kUser}, {system, Kind::kSystem}};
  ASSERT_TRUE(BuildIn(system, "python", options_).ok());
  auto found = FindImage(both, "python");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->store, system);
  EXPECT_EQ(found->store_kind, Kind::kSystem);
  EXPECT_EQ(found->rootfs, system + "/images/" + found->id + "/rootfs");

  ASSERT_TRUE(BuildIn(user, "python", options_).ok());
  found = FindImage(both, "python");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->store, user) << "the user's own store is searched first";
  // An explicit home is the only store searched.
  EXPECT_EQ(FindImage({{root_ + "/other", Kind::kExplicit}}, "python").status().code(),
            StatusCode::kNotFound);

  auto all = ListImages(both);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].store_kind, Kind::kUser);
  EXPECT_EQ(all[1].store_kind, Kind::kSystem);
}

TEST_F(StoreTest, BuildIsReadableByEveryUserWhateverTheUmask) {
  mode_t old = ::umask(077);
  auto built = Build("python", options_);
  ::umask(old);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  for (const std::string& path :
       {built->dir, built->rootfs, built->dir + "/manifest.json", home_ + "/images/by-name"}) {
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_mode & 0055, S_ISDIR(st.st_mode) ? 0055u : 0044u) << path;
  }
  if (::geteuid() == 0) {  // root's store itself (the system store) is opened up too
    struct stat st {};
    ASSERT_EQ(::stat((home_ + "/images").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0755u);
  }
}

TEST(MissingImageHintTest, GivesACommandThatWorksForThisUser) {
  const std::vector<base::ImageStore> user = {{"/home/u/.local/share/codebox", Kind::kUser},
                                              {"/var/lib/codebox", Kind::kSystem}};
  std::string as_user = MissingImageHint("python", user, /*root=*/false);
  EXPECT_NE(as_user.find("run: sudo codebox image build python ("), std::string::npos) << as_user;
  EXPECT_NE(as_user.find("in /home/u/.local/share/codebox or /var/lib/codebox"), std::string::npos)
      << as_user;
  EXPECT_NE(as_user.find("needs root"), std::string::npos) << as_user;

  EXPECT_EQ(MissingImageHint("python", {{"/var/lib/codebox", Kind::kSystem}}, /*root=*/true),
            "image 'python' is not built; run: codebox image build python");

  const std::vector<base::ImageStore> explicit_home = {{"/srv/cb", Kind::kExplicit}};
  EXPECT_EQ(MissingImageHint("python", explicit_home, /*root=*/true),
            "image 'python' is not built in /srv/cb; run: CODEBOX_HOME=/srv/cb codebox image "
            "build python");
  std::string explicit_user = MissingImageHint("python", explicit_home, /*root=*/false);
  EXPECT_NE(explicit_user.find("run: sudo env CODEBOX_HOME=/srv/cb codebox image build python"),
            std::string::npos)
      << explicit_user;
}

TEST(MissingImageHintTest, UnreadableStoreSaysWhatToOpenUp) {
  std::string m = UnreadableImageHint("python", "/var/lib/codebox", "/var/lib/codebox/images/abc",
                                      "/var/lib/codebox/images/abc/manifest.json", EACCES);
  EXPECT_NE(m.find("Permission denied"), std::string::npos) << m;
  EXPECT_NE(m.find("sudo chmod a+rX /var/lib/codebox /var/lib/codebox/images "
                   "/var/lib/codebox/images/abc /var/lib/codebox/images/abc/rootfs "
                   "/var/lib/codebox/images/abc/manifest.json"),
            std::string::npos)
      << m;
}

TEST_F(StoreTest, UnreadableStoreIsPermissionDeniedNotMissing) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads every store; needs a non-root run";
  ASSERT_TRUE(Build("python", options_).ok());
  ASSERT_EQ(::chmod((home_ + "/images").c_str(), 0), 0);
  auto found = FindImage(home_, "python");
  ::chmod((home_ + "/images").c_str(), 0755);
  EXPECT_EQ(found.status().code(), StatusCode::kPermissionDenied) << found.status().ToString();
  EXPECT_NE(found.status().message().find("chmod a+rX"), std::string::npos);
}

TEST(OutputSummarizerTest, ClassifiesToolLines) {
  std::string phase, item;
  EXPECT_TRUE(ClassifyDebootstrapLine("I: Retrieving libc6 2.36-9", &phase, &item));
  EXPECT_EQ(phase, "retrieving packages");
  EXPECT_EQ(item, "libc6");
  EXPECT_TRUE(ClassifyDebootstrapLine("I: Unpacking required packages...", &phase, &item));
  EXPECT_EQ(phase, "unpacking");
  EXPECT_EQ(item, "");
  EXPECT_FALSE(ClassifyDebootstrapLine("2025-05-20 URL:http://x [1/1] -> y", &phase, &item));
  EXPECT_TRUE(ClassifyAptLine("Unpacking python3-numpy (1:1.24.2-1+deb12u1) ...", &phase, &item));
  EXPECT_EQ(item, "python3-numpy");
  EXPECT_TRUE(ClassifyAptLine("Setting up libssl3:amd64 (3.0.16-1~deb12u1) ...", &phase, &item));
  EXPECT_EQ(phase, "configuring");
  EXPECT_EQ(item, "libssl3");

  std::vector<std::string> said;
  OutputSummarizer s("apt-get", ClassifyAptLine, [&](const std::string& l) { said.push_back(l); });
  for (int i = 0; i < 50; ++i) s.OnLine("Unpacking p" + std::to_string(i) + " (1) ...");
  s.OnLine("E: Sub-process /usr/bin/dpkg returned an error code (1)");
  ASSERT_EQ(said.size(), 2u);  // one phase line; errors always pass
  EXPECT_EQ(said[0], "apt-get: unpacking p0 ...");
  EXPECT_EQ(said[1], "apt-get: E: Sub-process /usr/bin/dpkg returned an error code (1)");
}

}  // namespace
}  // namespace codebox::image
