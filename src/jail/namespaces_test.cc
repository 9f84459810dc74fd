// The supervisor's first steps, in a test child: clone into the namespaces, map box root,
// become it, drop every privilege. Runs as root and as an ordinary user (where the host
// allows unprivileged user namespaces).
#include "jail/namespaces.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "jail/privileges.h"

namespace codebox::jail::ns {
namespace {

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
  (void)!::write(go[1], "g", 1);
  ::close(go[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(*child, &status, 0), *child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10: no go-ahead, 11: not PID 1, 12-13: not box root, 14: DropAll failed, "
         "15: a capability is left, 16: no no_new_privs";
}

}  // namespace
}  // namespace codebox::jail::ns
