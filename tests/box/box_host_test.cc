// DescribeHost against facts read independently of it, and a box started by a non-root user
// from an image root built (the system store is meant for every user).
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include "base/io.h"
#include "base/paths.h"
#include "codebox/box.h"
#include "codebox/host.h"
#include "image/store.h"

namespace codebox {
namespace {

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

TEST(DescribeHostTest, AgreesWithIndependentFacts) {
  HostDescription host = DescribeHost();
  EXPECT_EQ(host.jail.root, ::geteuid() == 0);

  // cgroup v2 at the top means a v2 host; v1 hierarchies mean the box's cgroups are v1.
  if (Exists("/sys/fs/cgroup/cgroup.controllers")) {
    EXPECT_NE(host.jail.cgroup_version, 1);
  } else if (Exists("/sys/fs/cgroup/memory/memory.limit_in_bytes") ||
             Exists("/sys/fs/cgroup/pids")) {
    EXPECT_NE(host.jail.cgroup_version, 2);
  }
  EXPECT_EQ(host.jail.cgroup_version == 0, host.jail.cgroup_controllers.empty());
  // Root on a writable v1 or v2 hierarchy gets every controller; a user without delegation
  // is told what is missing and how to get it.
  if (!host.jail.cgroup_missing.empty()) {
    EXPECT_FALSE(host.jail.cgroup_hint.empty());
  }

  auto max_userns = base::ReadFile("/proc/sys/user/max_user_namespaces");
  if (max_userns.ok() && std::atoi(max_userns->c_str()) == 0) {
    EXPECT_FALSE(host.jail.user_namespaces);
    EXPECT_FALSE(host.jail.usable);
  }
  if (host.jail.usable) {
    EXPECT_TRUE(host.jail.user_namespaces) << "the jail probe made one";
  }

  EXPECT_EQ(host.vm.tcg_usable, !host.vm.qemu.empty());
  if (!host.vm.qemu.empty()) {
    EXPECT_TRUE(::access(host.vm.qemu.c_str(), X_OK) == 0);
  }
  if (::access("/dev/kvm", R_OK | W_OK) != 0) {
    EXPECT_FALSE(host.vm.kvm_usable);
  }

  EXPECT_EQ(host.driver_usable, host.jail.usable || host.vm.kvm_usable);  // auto, no tcg
  if (host.driver_usable) {
    std::vector<std::string> names;
    for (const HostLimit& l : host.limits) names.push_back(l.name);
    for (const char* n : {"memory", "processes", "cpu", "disk", "network"}) {
      EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
    }
    if (host.driver == "jail") {
      bool memory_cgroup = std::count(host.jail.cgroup_controllers.begin(),
                                      host.jail.cgroup_controllers.end(), "memory") == 1;
      EXPECT_EQ(host.limits[0].enforced, memory_cgroup) << host.limits[0].detail;
    }
  }

  auto stores = base::ImageStores();
  ASSERT_EQ(host.stores.size(), stores.size());
  for (size_t i = 0; i < stores.size(); ++i) EXPECT_EQ(host.stores[i].path, stores[i].path);
  auto recipes = image::ListRecipes();
  ASSERT_EQ(host.images.size(), recipes.size());
  for (size_t i = 0; i < recipes.size(); ++i) {
    EXPECT_EQ(host.images[i].name, recipes[i]);
    auto found = image::FindImage(stores, recipes[i]);
    EXPECT_EQ(host.images[i].built, found.ok());
    if (found.ok()) {
      EXPECT_EQ(host.images[i].store, found->store);
    } else {
      EXPECT_NE(host.images[i].detail.find("codebox image build"), std::string::npos);
    }
  }
}

// Runs in a forked child as `uid`: a box from `home` (empty: the default search), prints its
// uid map. Exit 0 ok, 77 skipped (the reason on stdout), else failed.
[[noreturn]] void RunBoxAs(uid_t uid, const std::string& home, int out_fd) {
  auto say = [&](const std::string& s) { (void)base::WriteAll(out_fd, s); };
  if (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0) {
    say("setuid failed");
    ::_exit(1);
  }
  ::setenv("HOME", "/nonexistent", 1);
  ::unsetenv("XDG_DATA_HOME");
  ::unsetenv("CODEBOX_HOME");
  HostDescription host = DescribeHost();
  if (!host.jail.usable) {
    say("a jail cannot run as uid " + std::to_string(uid) + " here: " + host.jail.detail);
    ::_exit(77);
  }
  BoxOptions options;
  options.driver = DriverKind::kJail;
  options.home = home;
  auto box = Box::Create(options);
  if (!box.ok()) {
    say("Box::Create as uid " + std::to_string(uid) + ": " + box.status().ToString());
    ::_exit(1);
  }
  auto r = (*box)->Exec({"python3", "-c", "print(open('/proc/self/uid_map').read().split())"});
  if (!r.ok()) {
    say(r.status().ToString());
    ::_exit(1);
  }
  say(r->stdout_data + r->stderr_data);
  ::_exit(r->exit_code == 0 ? 0 : 1);
}

TEST(NonRootBoxTest, RunsFromAnImageRootBuilt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to another uid (nobody)";
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "a non-root box limits memory with RLIMIT_AS, which leaves no room for "
                  "AddressSanitizer's shadow memory in the sanitized supervisor; the release "
                  "run covers this test";
#endif
  // The system store when it has the image (the default search of any user finds it); else
  // an explicit $CODEBOX_HOME root built into.
  std::string home;
  auto system = image::FindImage({{base::kSystemStore, base::ImageStore::Kind::kSystem}}, "python");
  if (!system.ok()) {
    const char* env = std::getenv("CODEBOX_HOME");
    if (env == nullptr || !image::FindImage(env, "python").ok()) {
      GTEST_SKIP() << "no python image root built: " << system.status().message();
    }
    home = env;
  }
  const uid_t nobody = 65534;
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    RunBoxAs(nobody, home, fds[1]);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, n);
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << out;
  ASSERT_EQ(WEXITSTATUS(status), 0) << out;
  // Box root is the caller's uid outside: nobody, not root.
  EXPECT_EQ(out, "['0', '65534', '1']\n");
}

}  // namespace
}  // namespace codebox
