// Isolation: what code inside a jail can see and do.

#include <cstdlib>
#include <fstream>

#include "jail_fixture.h"
#include "testing/loopback_listener.h"

namespace codebox::jail::testing {
namespace {

TEST(JailProbe, SupportedHere) {
  Status st = ProbeJailSupport();
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST_F(JailTest, HostnameIsCodebox) {
  StartBox(Config());
  auto r = Sh("cat /proc/sys/kernel/hostname");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "codebox\n");
}

TEST_F(JailTest, RootIsReadOnly) {
  StartBox(Config());
  auto r = Sh("echo x > /usr/evil");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("Read-only file system"), std::string::npos) << r.err;
  EXPECT_NE(Sh("touch /etc/evil").exit_code, 0);
  EXPECT_NE(Sh("touch /evil").exit_code, 0);
  EXPECT_NE(Sh("touch /.codebox/codebox-agent").exit_code, 0);
}

TEST_F(JailTest, WorkdirTmpAndHomeAreWritable) {
  StartBox(Config());
  auto r =
      Sh("cd /work && echo hello > f && cat f && echo t > /tmp/t && echo r > /root/r && "
         "echo s > /dev/shm/s && cat /tmp/t /root/r /dev/shm/s && pwd");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello\nt\nr\ns\n/work\n");
}

TEST_F(JailTest, ProcShowsOnlyTheBox) {
  StartBox(Config());
  auto r = Sh("cat /proc/1/cmdline | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]*$'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("/.codebox/codebox-agent", 0) == 0 || r.out.rfind("codebox-agent", 0) == 0,
            true)
      << r.out;
  // agent, sh, cat/ls/grep: a handful, nothing of the host's hundreds.
  int count = std::atoi(r.out.substr(r.out.find('\n') + 1).c_str());
  EXPECT_GT(count, 0);
  EXPECT_LT(count, 8) << r.out;
}

TEST_F(JailTest, OnlyLoopbackAndNoWayToHost) {
  // A server on the host's loopback: the box's 127.0.0.1 is its own, so it must not reach it.
  auto server = codebox::testing::ListenOnLoopback();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  int port = server->port;

  StartBox(Config());
  auto ifaces = Sh("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
  EXPECT_EQ(ifaces.out, "lo\n");
  auto r = Python(
      "import socket\n"
      "s = socket.socket()\n"
      "s.settimeout(3)\n"
      "try:\n"
      "    s.connect(('127.0.0.1', " +
      std::to_string(port) +
      "))\n"
      "    print('connected')\n"
      "except OSError as e:\n"
      "    print('refused' if isinstance(e, ConnectionRefusedError) else repr(e))\n"
      "try:\n"
      "    socket.create_connection(('1.1.1.1', 53), timeout=3)\n"
      "    print('internet')\n"
      "except OSError as e:\n"
      "    print('no internet')\n");
  EXPECT_EQ(r.out, "refused\nno internet\n") << r.err;
}

TEST_F(JailTest, HostEnvironmentAndFilesAreAbsent) {
  ::setenv("CODEBOX_HOST_SECRET", "hunter2", 1);
  std::string host_file = "/tmp/codebox-host-only-" + std::to_string(::getpid());
  std::ofstream(host_file) << "secret";
  StartBox(Config());
  ::unsetenv("CODEBOX_HOST_SECRET");
  auto r = Sh("env; cat /proc/1/environ | tr '\\0' '\\n'; test -e " + host_file +
              " && echo FILE-VISIBLE; grep -rs hunter2 /proc/1/environ /work /tmp; true");
  ::unlink(host_file.c_str());
  EXPECT_EQ(r.out.find("hunter2"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("CODEBOX_HOST_SECRET"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FILE-VISIBLE"), std::string::npos) << r.out;
}

TEST_F(JailTest, NoCapabilitiesAndNoNewPrivs) {
  StartBox(Config());
  auto r =
      Sh("grep -E '^(CapEff|CapPrm|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status; id -u");
  EXPECT_NE(r.out.find("CapEff:\t0000000000000000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CapBnd:\t0000000000000000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NoNewPrivs:\t1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Seccomp:\t2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n0\n"), std::string::npos) << r.out;  // box root, with nothing
}

TEST_F(JailTest, SeccompRefusesDangerousSyscalls) {
  StartBox(Config());
  // x86_64 numbers; each prints "name errno".
  auto r = Python(
      "import ctypes, os\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "def call(name, nr, *args):\n"
      "    ctypes.set_errno(0)\n"
      "    rc = libc.syscall(nr, *args)\n"
      "    print(name, 'ok' if rc >= 0 else os.strerror(ctypes.get_errno()))\n"
      "call('unshare', 272, 0x10000000)\n"  // CLONE_NEWUSER
      "call('unshare_net', 272, 0x40000000)\n"
      "call('mount', 165, b'none', b'/tmp', b'tmpfs', 0, None)\n"
      "call('bpf', 321, 0, 0, 0)\n"
      "call('ptrace', 101, 0, 0, 0, 0)\n"  // PTRACE_TRACEME
      "call('clone3', 435, 0, 0)\n"
      "call('keyctl', 250, 0, 0, 0)\n"
      "call('io_uring_setup', 425, 1, 0)\n"
      "call('userfaultfd', 323, 0)\n"
      "call('perf_event_open', 298, 0, 0, -1, -1, 0)\n"
      "call('setns', 308, 0, 0)\n"
      "call('personality', 135, 0x0400000)\n"  // READ_IMPLIES_EXEC
      "call('personality_query', 135, 0xffffffff)\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* name :
       {"unshare", "unshare_net", "mount", "bpf", "ptrace", "keyctl", "io_uring_setup",
        "userfaultfd", "perf_event_open", "setns", "personality"}) {
    EXPECT_NE(r.out.find(std::string(name) + " Operation not permitted\n"), std::string::npos)
        << name << " in:\n"
        << r.out;
  }
  EXPECT_NE(r.out.find("clone3 Function not implemented\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("personality_query ok\n"), std::string::npos) << r.out;
  // Ordinary process creation still works (glibc falls back from clone3 to clone).
  auto fork = Python("import subprocess; print(subprocess.run(['true']).returncode)");
  EXPECT_EQ(fork.out, "0\n") << fork.err;
}

TEST_F(JailTest, KexecKillsTheProcess) {
  StartBox(Config());
  auto r = Python("import ctypes; ctypes.CDLL(None).syscall(246, 0, 0, 0, 0); print('alive')");
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.signal, 31) << "expected SIGSYS, got exit " << r.exit_code << " " << r.err;
}

TEST_F(JailTest, StartFailureNamesTheStep) {
  JailConfig c = Config();
  c.workdir = "/opt/no/such/dir";
  auto jail = Jail::Start(c);
  ASSERT_FALSE(jail.ok());
  EXPECT_EQ(jail.status().code(), StatusCode::kStartFailed) << jail.status().ToString();
  EXPECT_NE(jail.status().message().find("build root"), std::string::npos)
      << jail.status().ToString();
  c = Config();
  c.rootfs = "/nonexistent";
  EXPECT_EQ(Jail::Start(c).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace codebox::jail::testing
