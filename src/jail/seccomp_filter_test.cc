// The box's seccomp filter, installed in a forked child of the test (no_new_privs makes that
// possible without privileges). Each check uses a call whose answer without the filter differs
// from the filter's, so a rule that went missing fails here.
#include "jail/seccomp_filter.h"

#include <gtest/gtest.h>
#include <linux/sched.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <string>

namespace codebox::jail::seccomp {
namespace {

// Runs `checks` in a child under the filter; returns what they wrote (the failures).
std::string UnderFilter(std::string (*checks)()) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
      out = "no_new_privs failed";
    } else if (Status st = Install(); !st.ok()) {
      out = "Install: " + st.ToString();
    } else {
      out = checks();
    }
    (void)!::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status))
    out += " (the checking child died with signal " + std::to_string(WTERMSIG(status)) + ")";
  return out;
}

// "name: errno N, wanted M; " when a call did not fail with the expected errno.
std::string Expect(const char* name, long rc, int want_errno) {
  int err = errno;
  if (rc == -1 && err == want_errno) return "";
  return std::string(name) + ": rc " + std::to_string(rc) + " errno " + std::to_string(err) +
         ", wanted errno " + std::to_string(want_errno) + "; ";
}
std::string ExpectOk(const char* name, long rc) {
  if (rc >= 0) return "";
  return std::string(name) + ": failed with errno " + std::to_string(errno) + "; ";
}

TEST(SeccompFilter, RefusesNamespacesAndKernelSurface) {
  std::string failures = UnderFilter([]() -> std::string {
    std::string f;
    f += Expect("unshare(CLONE_NEWUSER)", ::unshare(CLONE_NEWUSER), EPERM);
    f += Expect("unshare(CLONE_NEWNS)", ::unshare(CLONE_NEWNS), EPERM);
    f += Expect("unshare(CLONE_NEWTIME)", ::unshare(0x80), EPERM);
    f += Expect("clone3", ::syscall(SYS_clone3, nullptr, 0), ENOSYS);
    f += Expect("ptrace(TRACEME)", ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr), EPERM);
    f += Expect("io_uring_setup", ::syscall(SYS_io_uring_setup, 1, nullptr), EPERM);
    f += Expect("mount", ::syscall(SYS_mount, "none", "/", "tmpfs", 0, nullptr), EPERM);
    f += Expect("ioctl(TIOCSTI)", ::ioctl(0, TIOCSTI, "x"), EPERM);
    f += Expect("personality(ADDR_NO_RANDOMIZE)", ::personality(ADDR_NO_RANDOMIZE), EPERM);
    f += ExpectOk("personality(query)", ::personality(0xffffffff));
    return f;
  });
  EXPECT_EQ(failures, "");
}

TEST(SeccompFilter, AllowsOnlyTheUsualSocketFamilies) {
  std::string failures = UnderFilter([]() -> std::string {
    std::string f;
    f += ExpectOk("socket(AF_UNIX)", ::socket(AF_UNIX, SOCK_STREAM, 0));
    f += ExpectOk("socket(AF_INET)", ::socket(AF_INET, SOCK_STREAM, 0));
    f += ExpectOk("socket(AF_INET6)", ::socket(AF_INET6, SOCK_DGRAM, 0));
    f += ExpectOk("socket(AF_NETLINK)", ::socket(AF_NETLINK, SOCK_RAW, 0));
    int pair[2];
    f += ExpectOk("socketpair(AF_UNIX)", ::socketpair(AF_UNIX, SOCK_STREAM, 0, pair));
    f += Expect("socket(AF_PACKET)", ::socket(AF_PACKET, SOCK_RAW, 0), EAFNOSUPPORT);
    f += Expect("socket(AF_ALG)", ::socket(AF_ALG, SOCK_SEQPACKET, 0), EAFNOSUPPORT);
    f += Expect("socket(AF_VSOCK)", ::socket(AF_VSOCK, SOCK_STREAM, 0), EAFNOSUPPORT);
    f += Expect("socketpair(AF_ALG)", ::socketpair(AF_ALG, SOCK_SEQPACKET, 0, pair), EAFNOSUPPORT);
    f += Expect("socket(high bits)", ::syscall(SYS_socket, (1ul << 32) | AF_UNIX, SOCK_STREAM, 0),
                EAFNOSUPPORT);
    return f;
  });
  EXPECT_EQ(failures, "");
}

TEST(SeccompFilter, OrdinaryForkStillWorksAndKexecKills) {
  std::string failures = UnderFilter([]() -> std::string {
    std::string f;
    pid_t child = ::fork();
    if (child == 0) ::_exit(7);
    int status = 0;
    ::waitpid(child, &status, 0);
    if (child < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 7) f += "fork failed; ";
    child = ::fork();
    if (child == 0) {
      ::syscall(SYS_kexec_load, 0, 0, nullptr, 0);
      ::_exit(0);
    }
    ::waitpid(child, &status, 0);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSYS) f += "kexec_load was not killed; ";
    return f;
  });
  EXPECT_EQ(failures, "");
}

}  // namespace
}  // namespace codebox::jail::seccomp
