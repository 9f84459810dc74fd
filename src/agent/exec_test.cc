#include "agent/exec.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace codebox::agent {
namespace {

protocol::msg::Exec Request(std::vector<std::string> argv) {
  protocol::msg::Exec r;
  r.argv = std::move(argv);
  return r;
}

TEST(CheckExec, AcceptsAValidRequestAndGivesItsEnvironmentAsExecveTakesIt) {
  auto r = Request({"python3", "-c", "print(1)"});
  r.env = {{"PATH", "/bin"}, {"EMPTY", ""}, {"EQ", "a=b"}};
  r.cwd = "/work";
  r.stdin_stream = true;
  r.timeout = std::chrono::milliseconds(1500);
  r.output_limit = 99;
  r.user = protocol::msg::User{1000, 100};
  Status st = CheckExec(r);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(EnvironmentStrings(r), (std::vector<std::string>{"EMPTY=", "EQ=a=b", "PATH=/bin"}));
}

TEST(CheckExec, RefusesWhatExecveWouldCutOrMisread) {
  auto expect_invalid = [](const protocol::msg::Exec& r, const std::string& text) {
    Status st = CheckExec(r);
    ASSERT_FALSE(st.ok()) << text;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(text), std::string::npos) << st.ToString();
  };
  expect_invalid(Request({}), "\"argv\" is empty");
  expect_invalid(Request({"echo", std::string("a\0b", 3)}), "argv[1] contains a NUL");
  auto r = Request({"true"});
  r.env = {{"", "x"}};
  expect_invalid(r, "bad \"env\" entry");
  r.env = {{"A=B", "x"}};
  expect_invalid(r, "bad \"env\" entry \"A=B\"");
  r.env = {{std::string("A\0B", 3), "x"}};
  expect_invalid(r, "bad \"env\" entry");
  r.env = {{"A", std::string("x\0y", 3)}};
  expect_invalid(r, "bad \"env\" entry \"A\"");
  r.env = {{std::string(1000, 'N') + "=", "x"}};
  Status long_name = CheckExec(r);
  ASSERT_FALSE(long_name.ok());
  EXPECT_LT(long_name.message().size(), 200u) << "the name is quoted cut short";
  r = Request({"true"});
  r.cwd = std::string("/a\0b", 4);
  expect_invalid(r, "\"cwd\" contains a NUL");
}

// Reads a non-blocking pipe until `text` has come, or to its end when `text` is empty (each
// wait bounded by 10 s).
std::string ReadUntil(int fd, const std::string& text) {
  std::string out;
  char buf[4096];
  while (text.empty() || out.find(text) == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10'000) <= 0) break;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string ReadAll(int fd) { return ReadUntil(fd, ""); }

struct Ran {
  std::string out, err;
  int status = 0;
  pid_t pgid = 0, sid = 0;
};

Ran RunToEnd(const protocol::msg::Exec& spec) {
  Ran ran;
  auto spawned = SpawnExec(spec);
  EXPECT_TRUE(spawned.ok()) << spawned.status().ToString();
  if (!spawned.ok()) return ran;
  ran.out = ReadAll(spawned->stdout_fd.get());
  ran.err = ReadAll(spawned->stderr_fd.get());
  ran.pgid = ::getpgid(spawned->pid);
  ran.sid = ::getsid(spawned->pid);
  ::waitpid(spawned->pid, &ran.status, 0);
  EXPECT_EQ(ran.pgid, spawned->pid) << "its own process group";
  EXPECT_EQ(ran.sid, spawned->pid) << "its own session";
  return ran;
}

TEST(SpawnExec, RunsWithExactlyTheGivenEnvironmentAndCwd) {
  protocol::msg::Exec spec;
  spec.argv = {"sh", "-c", "pwd; env | sort"};
  spec.env = {{"PATH", "/usr/bin:/bin"}, {"ONLY", "this"}};
  spec.cwd = "/tmp";
  Ran ran = RunToEnd(spec);
  EXPECT_EQ(ran.out, "/tmp\nONLY=this\nPATH=/usr/bin:/bin\nPWD=/tmp\n");
  EXPECT_TRUE(WIFEXITED(ran.status) && WEXITSTATUS(ran.status) == 0) << ran.err;
}

TEST(SpawnExec, AMissingProgramExits127WithTheReason) {
  protocol::msg::Exec spec;
  spec.argv = {"codebox-no-such-program"};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  Ran ran = RunToEnd(spec);
  EXPECT_TRUE(WIFEXITED(ran.status) && WEXITSTATUS(ran.status) == 127);
  EXPECT_EQ(ran.err.rfind("codebox-agent: exec codebox-no-such-program: ", 0), 0u) << ran.err;
}

TEST(SpawnExec, AProgramThatIsThereButCannotRunExits126AsShellsDo) {
  char dir[] = "/tmp/codebox-exec-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string script = std::string(dir) + "/not-executable";
  {
    FILE* f = std::fopen(script.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("#!/bin/sh\necho ran\n", f);
    std::fclose(f);
  }
  ::chmod(script.c_str(), 0644);
  auto status_of = [](const std::string& program, std::string* err) {
    protocol::msg::Exec spec;
    spec.argv = {program};
    spec.env = {{"PATH", "/usr/bin:/bin"}};
    Ran ran = RunToEnd(spec);
    *err = ran.err;
    return WIFEXITED(ran.status) ? WEXITSTATUS(ran.status) : -1;
  };
  std::string err;
  // A root test process may read the file, but no x bit means EACCES for everyone.
  EXPECT_EQ(status_of(script, &err), 126) << err;
  EXPECT_NE(err.find("Permission denied"), std::string::npos) << err;
  EXPECT_EQ(status_of(dir, &err), 126) << "a directory: " << err;
  // ENOTDIR: a path through a file is "not found", as in a shell.
  EXPECT_EQ(status_of(script + "/x", &err), 127) << err;
  ::unlink(script.c_str());
  ::rmdir(dir);
  EXPECT_EQ(ExecFailureStatus(ENOENT), 127);
  EXPECT_EQ(ExecFailureStatus(ENOTDIR), 127);
  EXPECT_EQ(ExecFailureStatus(ENOEXEC), 126);
  EXPECT_EQ(ExecFailureStatus(EISDIR), 126);
}

TEST(SpawnExec, AMissingCwdExits127WithTheReason) {
  protocol::msg::Exec spec;
  spec.argv = {"true"};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  spec.cwd = "/codebox-no-such-dir";
  Ran ran = RunToEnd(spec);
  EXPECT_TRUE(WIFEXITED(ran.status) && WEXITSTATUS(ran.status) == 127);
  EXPECT_EQ(ran.err.rfind("codebox-agent: chdir /codebox-no-such-dir: ", 0), 0u) << ran.err;
}

TEST(SpawnExec, StdinIsDevNullUnlessStreamed) {
  protocol::msg::Exec spec;
  spec.argv = {"cat"};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  auto quiet = SpawnExec(spec);
  ASSERT_TRUE(quiet.ok());
  EXPECT_FALSE(quiet->stdin_fd.valid());
  EXPECT_EQ(ReadAll(quiet->stdout_fd.get()), "");
  int status;
  ::waitpid(quiet->pid, &status, 0);

  spec.stdin_stream = true;
  auto fed = SpawnExec(spec);
  ASSERT_TRUE(fed.ok());
  ASSERT_TRUE(fed->stdin_fd.valid());
  ASSERT_EQ(::write(fed->stdin_fd.get(), "fed", 3), 3);
  fed->stdin_fd.reset();
  EXPECT_EQ(ReadAll(fed->stdout_fd.get()), "fed");
  ::waitpid(fed->pid, &status, 0);
}

protocol::msg::Exec TtySpec(std::string script) {
  protocol::msg::Exec spec;
  spec.argv = {"sh", "-c", std::move(script)};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  spec.tty = protocol::msg::TerminalSize{33, 101};
  return spec;
}

TEST(SpawnExecTty, TheProgramHasATerminalOfTheGivenSizeAsStdinStdoutAndStderr) {
  auto spawned =
      SpawnExec(TtySpec("for f in 0 1 2; do [ -t $f ] && echo tty$f; done; stty size; "
                        "echo to-stderr >&2; ps -o tty= -p $$ | grep -q pts && echo ctty"));
  ASSERT_TRUE(spawned.ok()) << spawned.status().ToString();
  EXPECT_FALSE(spawned->stderr_fd.valid()) << "a terminal's output is one stream";
  ASSERT_TRUE(spawned->stdin_fd.valid());
  // Read to EIO: the master ends once the program (the only one holding the slave) exits.
  std::string out = ReadAll(spawned->stdout_fd.get());
  int status;
  ::waitpid(spawned->pid, &status, 0);
  // The terminal's line discipline turns "\n" into "\r\n" (onlcr).
  EXPECT_EQ(out, "tty0\r\ntty1\r\ntty2\r\n33 101\r\nto-stderr\r\nctty\r\n");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(SpawnExecTty, AResizeReachesTheProgramAsSigwinchAndItsNewSize) {
  auto spawned =
      SpawnExec(TtySpec("trap 'stty size; exit 0' WINCH; echo ready; i=0; "
                        "while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; echo no-sigwinch"));
  ASSERT_TRUE(spawned.ok()) << spawned.status().ToString();
  ASSERT_NE(ReadUntil(spawned->stdout_fd.get(), "ready\r\n").find("ready"), std::string::npos);
  ASSERT_TRUE(SetTerminalSize(spawned->stdout_fd.get(), {40, 120}).ok());
  EXPECT_EQ(ReadAll(spawned->stdout_fd.get()), "40 120\r\n");
  int status;
  ::waitpid(spawned->pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(SpawnExecTty, CtrlCTypedOnTheTerminalInterruptsTheForegroundProgram) {
  auto spawned = SpawnExec(TtySpec("echo ready; exec sleep 100"));
  ASSERT_TRUE(spawned.ok()) << spawned.status().ToString();
  ASSERT_NE(ReadUntil(spawned->stdout_fd.get(), "ready").find("ready"), std::string::npos);
  ::usleep(100'000);  // sleep has replaced sh
  ASSERT_EQ(::write(spawned->stdin_fd.get(), "\x03", 1), 1);
  int status = 0;
  ::waitpid(spawned->pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
}

TEST(SpawnExecTty, AMissingProgramSaysWhyOnTheTerminal) {
  protocol::msg::Exec spec = TtySpec("");
  spec.argv = {"codebox-no-such-program"};
  auto spawned = SpawnExec(spec);
  ASSERT_TRUE(spawned.ok()) << spawned.status().ToString();
  std::string out = ReadAll(spawned->stdout_fd.get());
  int status;
  ::waitpid(spawned->pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 127);
  EXPECT_EQ(out.rfind("codebox-agent: exec codebox-no-such-program: ", 0), 0u) << out;
}

}  // namespace
}  // namespace codebox::agent
