// The supervisor's first steps, in a test child: clone into the namespaces, map box root,
// become it, drop every privilege. Runs as root and as an ordinary user (where the host
// allows unprivileged user namespaces).
#include "jail/namespaces.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>

#include "jail/privileges.h"

namespace codebox::jail::ns {
namespace {

// The parent's half of a cloned-child check: tell the child (waiting on the other end of
// `go_write`'s pipe) to go on, reap it, and expect it to exit 0; `legend` says what its other
// exit codes mean.
void GoAheadAndExpectSuccess(pid_t child, int go_write, const char* legend) {
  (void)!::write(go_write, "g", 1);
  ::close(go_write);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << legend;
}

TEST(CloneFlags, EveryNamespaceButTheCgroupOne) {
  const int flags = CloneFlags();
  for (int ns :
       {CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS}) {
    EXPECT_EQ(flags & ns, ns) << std::hex << ns;
  }
  EXPECT_EQ(flags & CLONE_NEWCGROUP, 0) << "unshared by the child once it is in its cgroups";
}

TEST(ChooseHostIds, RootGetsAPerBoxIdOthersTheirOwn) {
  HostIds ids = ChooseHostIds();
  if (::geteuid() == 0) {
    EXPECT_EQ(ids.uid, kBoxIdBase + static_cast<uid_t>(::getpid()));
    EXPECT_EQ(ids.gid, static_cast<gid_t>(ids.uid));
    EXPECT_NE(ids.uid, 0u) << "never host root";
  } else {
    EXPECT_EQ(ids.uid, ::geteuid());
    EXPECT_EQ(ids.gid, ::getegid());
  }
}

TEST(ChooseHostIds, TheBoxUserGetsASecondPerBoxIdOnlyForRoot) {
  HostIds ids = ChooseHostIds(BoxUser{1000, 1000});
  if (::geteuid() != 0) {
    EXPECT_EQ(ids.user, std::nullopt) << "an ordinary user can map one id only";
    return;
  }
  ASSERT_EQ(ids.user, (BoxUser{1000, 1000}));
  EXPECT_EQ(ids.user_host, kBoxUserIdBase + static_cast<uid_t>(::getpid()));
  EXPECT_NE(ids.user_host, ids.uid);
  // Root's ids and the users' lie in ranges that never meet, whatever the pids.
  EXPECT_GT(kBoxUserIdBase, kBoxIdBase + (1u << 22));
  EXPECT_LT(kBoxUserIdBase + (1u << 22), 0xffffffffu);
  EXPECT_EQ(ChooseHostIds(BoxUser{0, 0}).user, std::nullopt) << "root is mapped already";
}

// "Name:\tvalue" of /proc/self/status.
std::string StatusField(const std::string& name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + ":", 0) == 0)
      return line.substr(line.find_first_not_of(" \t", name.size() + 1));
  }
  return "";
}

TEST(CloneChild, IsPidOneThenBoxRootThenPowerless) {
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  auto child = CloneChild(CloneFlags());
  if (!child.ok()) {
    ::close(go[0]);
    ::close(go[1]);
    GTEST_SKIP() << "this host lets no process create user namespaces: "
                 << child.status().ToString();
  }
  if (*child == 0) {
    ::close(go[1]);
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(10);
    if (::getpid() != 1) ::_exit(11);
    if (!privileges::BecomeBoxRoot().ok()) ::_exit(12);
    if (::getuid() != 0 || ::getgid() != 0) ::_exit(13);
    if (!privileges::DropAll().ok()) ::_exit(14);
    for (const char* caps : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
      if (StatusField(caps) != "0000000000000000") ::_exit(15);
    }
    if (StatusField("NoNewPrivs") != "1") ::_exit(16);
    ::_exit(0);
  }
  ::close(go[0]);
  Status st = WriteIdMaps(*child, ChooseHostIds());
  EXPECT_TRUE(st.ok()) << st.ToString();
  GoAheadAndExpectSuccess(*child, go[1],
                          "10: no go-ahead, 11: not PID 1, 12-13: not box root, 14: DropAll "
                          "failed, 15: a capability is left, 16: no no_new_privs");
}

// What the supervisor does for a box whose image names a user, minus the mounts: map the user
// besides root, become box root keeping the user's ids saved, drop everything, hand the user
// to the agent; then what the agent and its exec's child do with it (src/agent/main.cc,
// src/agent/exec.cc). Only host root can map a second id.
TEST(CloneChild, TheBoxUserIsHandedToTheAgentWithoutACapability) {
  if (::geteuid() != 0) GTEST_SKIP() << "mapping a second id needs root";
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  const BoxUser user{1000, 1001};
  auto child = CloneChild(CloneFlags());
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  if (*child == 0) {
    ::close(go[1]);
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(10);
    if (!privileges::BecomeBoxRoot(user).ok()) ::_exit(11);
    if (!privileges::DropAll().ok()) ::_exit(12);
    if (!privileges::HandUserToAgent(user).ok()) ::_exit(13);
    uid_t r, e, s;
    gid_t rg, eg, sg;
    if (::getresuid(&r, &e, &s) != 0 || r != 0 || e != 1000 || s != 1000) ::_exit(14);
    if (::getresgid(&rg, &eg, &sg) != 0 || rg != 0 || eg != 1001 || sg != 1001) ::_exit(14);
    // The agent takes root back as its effective ids...
    if (::setresgid(0, 0, 1001) != 0 || ::setresuid(0, 0, 1000) != 0) ::_exit(15);
    // ...and holds no capability for it, or for anything.
    if (StatusField("CapEff") != "0000000000000000" ||
        StatusField("CapPrm") != "0000000000000000") {
      ::_exit(16);
    }
    // An exec's child becomes the user for good.
    if (::setresgid(1001, 1001, 1001) != 0 || ::setresuid(1000, 1000, 1000) != 0) ::_exit(18);
    if (::setresuid(0, 0, 0) == 0) ::_exit(19);
    ::_exit(0);
  }
  ::close(go[0]);
  Status st = WriteIdMaps(*child, ChooseHostIds(user));
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::ifstream uid_map("/proc/" + std::to_string(*child) + "/uid_map");
  std::string map((std::istreambuf_iterator<char>(uid_map)), std::istreambuf_iterator<char>());
  EXPECT_NE(map.find(std::to_string(kBoxUserIdBase + static_cast<uid_t>(::getpid()))),
            std::string::npos)
      << map;
  GoAheadAndExpectSuccess(*child, go[1],
                          "10: no go-ahead, 11: not box root, 12: DropAll failed, 13: hand-over "
                          "failed, 14: wrong ids after it, 15: root not taken back, 16: a "
                          "capability, 18: the user could not be become, 19: the user switched "
                          "back");
}

}  // namespace
}  // namespace codebox::jail::ns
