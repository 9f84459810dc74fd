// The agent's process table end to end (docs/protocol.md, "Processes"): processes that outlive
// the request that started them, attach with replay, several attachers, rings that drop the
// oldest bytes and say how many, signals by pid, and the table's bounds.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "agent_harness.h"

namespace codebox::testing {
namespace {

using namespace std::chrono_literals;
using protocol::AttachRequest;
using protocol::ExecRequest;

ExecRequest Sh(const std::string& script) {
  ExecRequest r;
  r.exec.argv = {"/bin/sh", "-c", script};
  r.exec.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", "/tmp"}};
  r.exec.cwd = "/tmp";
  return r;
}

// Whether `pid` is a live process (not a zombie).
bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

class AgentProcessTest : public ConnectedAgentTest {
 protected:
  // The table's entry for `pid`, or nullopt.
  std::optional<protocol::msg::ProcessEntry> Entry(int32_t pid) {
    auto list = client_->ListProcesses();
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    if (!list.ok()) return std::nullopt;
    for (const auto& e : *list) {
      if (e.pid == pid) return e;
    }
    return std::nullopt;
  }
  // Attaches to `pid` and waits for its end.
  StatusOr<ExecResult> Follow(int32_t pid, bool output = true) {
    AttachRequest attach;
    attach.pid = pid;
    attach.output = output;
    ASSIGN_OR_RETURN(std::unique_ptr<protocol::RunningExec> running, client_->Attach(attach));
    return running->Wait();
  }
  // Waits (bounded) until the process wrote at least `bytes` to stdout.
  void AwaitStdout(int32_t pid, uint64_t bytes) {
    for (int i = 0; i < 500; ++i) {
      auto e = Entry(pid);
      if (e && e->stdout_bytes >= bytes) return;
      std::this_thread::sleep_for(10ms);
    }
    FAIL() << "process " << pid << " never wrote " << bytes << " bytes";
  }
};

TEST_F(AgentProcessTest, BackgroundProcessOutlivesItsRequestAndReplaysOnAttach) {
  auto pid = client_->StartBackground(Sh("echo before; sleep 0.5; echo after; exit 3"));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  ASSERT_GT(*pid, 0);
  AwaitStdout(*pid, 7);
  auto entry = Entry(*pid);
  ASSERT_TRUE(entry);
  EXPECT_TRUE(entry->running);
  EXPECT_TRUE(entry->background);
  EXPECT_EQ(entry->argv, (std::vector<std::string>{
                             "/bin/sh", "-c", "echo before; sleep 0.5; echo after; exit 3"}));
  auto result = Follow(*pid);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->stdout_data, "before\nafter\n");
  EXPECT_EQ(result->exit_code, 3);
  EXPECT_EQ(result->dropped_stdout, 0u);
  // Ended, it stays in the table with its exit; a late attacher gets the replay and the exit.
  entry = Entry(*pid);
  ASSERT_TRUE(entry);
  EXPECT_FALSE(entry->running);
  ASSERT_TRUE(entry->exit);
  EXPECT_EQ(entry->exit->exit_code, 3);
  auto again = Follow(*pid);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->stdout_data, "before\nafter\n");
  EXPECT_EQ(again->exit_code, 3);
}

TEST_F(AgentProcessTest, StdinThroughAnAttacherAndTwoAttachersAtOnce) {
  ExecRequest r = Sh("cat");
  r.exec.stdin_stream = true;
  auto pid = client_->StartBackground(r);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  AttachRequest attach;
  attach.pid = *pid;
  auto first = client_->Attach(attach);
  auto second = client_->Attach(attach);
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE((*first)->WriteStdin("one\n").ok());
  AwaitStdout(*pid, 4);
  // The second attacher leaves; the process and the first go on.
  (*second)->Detach();
  auto detached = (*second)->Wait();
  ASSERT_FALSE(detached.ok());
  EXPECT_EQ(detached.status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE((*first)->WriteStdin("two\n").ok());
  ASSERT_TRUE((*first)->CloseStdin().ok());
  auto result = (*first)->Wait();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->stdout_data, "one\ntwo\n");
  EXPECT_EQ(result->exit_code, 0);
}

TEST_F(AgentProcessTest, AHandleThatGoesDetachesAndTheProcessRunsOn) {
  ExecRequest r = Sh("cat");
  r.exec.stdin_stream = true;
  auto pid = client_->StartBackground(r);
  ASSERT_TRUE(pid.ok());
  {
    AttachRequest attach;
    attach.pid = *pid;
    auto gone = client_->Attach(attach);
    ASSERT_TRUE(gone.ok());
    ASSERT_TRUE((*gone)->WriteStdin("kept\n").ok());
  }  // destroyed without Wait: detaches
  AwaitStdout(*pid, 5);
  auto entry = Entry(*pid);
  ASSERT_TRUE(entry);
  EXPECT_TRUE(entry->running);
  EXPECT_TRUE(client_->SignalProcess(*pid, 9, /*tree=*/true).ok());
  auto result = Follow(*pid);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->signal, 9);
  EXPECT_EQ(result->stdout_data, "kept\n");
}

TEST_F(AgentProcessTest, TheRingKeepsTheLastBytesAndCountsTheDropped) {
  ExecRequest r = Sh("head -c 300000 /dev/zero | tr '\\0' a; echo; echo tail");
  r.exec.ring_bytes = 4096;
  auto pid = client_->StartBackground(r);
  ASSERT_TRUE(pid.ok());
  AwaitStdout(*pid, 300006);
  auto result = Follow(*pid);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->stdout_data.size(), 4096u);
  EXPECT_EQ(result->dropped_stdout, 300006u - 4096u);
  EXPECT_EQ(result->stdout_data.substr(4096 - 6), "\ntail\n");
  auto entry = Entry(*pid);
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->stdout_bytes, 300006u);
  EXPECT_EQ(entry->dropped_stdout, 300006u - 4096u);
}

TEST_F(AgentProcessTest, KillingATreeEndsWhatLeftItsGroupAndSparesOthers) {
  auto victim = client_->StartBackground(Sh("setsid sleep 1000 & echo $!; sleep 1000"));
  auto bystander = client_->StartBackground(Sh("sleep 1000"));
  ASSERT_TRUE(victim.ok() && bystander.ok());
  AwaitStdout(*victim, 2);
  AttachRequest peek;
  peek.pid = *victim;
  auto peeking = client_->Attach(peek);
  ASSERT_TRUE(peeking.ok());
  EXPECT_EQ(client_->SignalProcess(*victim, 15, /*tree=*/true).code(),
            StatusCode::kInvalidArgument)
      << "a tree is only killed";
  ASSERT_TRUE(client_->SignalProcess(*victim, 9, /*tree=*/true).ok());
  auto killed = (*peeking)->Wait();
  ASSERT_TRUE(killed.ok()) << killed.status().ToString();
  EXPECT_EQ(killed->signal, 9);
  const pid_t escaped = std::stoi(killed->stdout_data);
  for (int i = 0; i < 200 && Alive(escaped); ++i) std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(Alive(escaped)) << "the setsid child went with its tree";
  EXPECT_TRUE(Alive(*bystander));
  // A signal to the group alone.
  ASSERT_TRUE(client_->SignalProcess(*bystander, 15).ok());
  auto result = Follow(*bystander, /*output=*/false);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->signal, 15);
  EXPECT_EQ(client_->SignalProcess(*bystander, 15).code(), StatusCode::kNotFound);
}

TEST_F(AgentProcessTest, CancellingAnExecSparesTheBackgroundProcesses) {
  auto background = client_->StartBackground(Sh("sleep 1000"));
  ASSERT_TRUE(background.ok());
  ExecRequest fg = Sh("sleep 1000");
  auto running = client_->StartExec(fg);
  ASSERT_TRUE(running.ok());
  for (int i = 0; i < 200 && (*running)->pid() == 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_GT((*running)->pid(), 0) << "the exec's handle learns its pid from `started`";
  (*running)->Kill();
  auto result = (*running)->Wait();
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->signal, 9);
  auto entry = Entry(*background);
  ASSERT_TRUE(entry);
  EXPECT_TRUE(entry->running);
}

// A listed argument is cut to 128 bytes without splitting a character (the host refuses a
// listing past the bound, and a cut character would grow into U+FFFD).
TEST_F(AgentProcessTest, ListedArgumentsAreCutWhereACharacterEnds) {
  ExecRequest r = Sh("true");
  r.exec.argv.push_back(std::string(127, 'a') + "\xc3\xa9tail");
  r.exec.argv.push_back(std::string("bad\xff") + std::string(200, 'b'));
  auto pid = client_->StartBackground(r);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  auto entry = Entry(*pid);
  ASSERT_TRUE(entry);
  ASSERT_EQ(entry->argv.size(), 5u);
  EXPECT_EQ(entry->argv[3], std::string(127, 'a'));
  // The host's request already carried the invalid byte as U+FFFD (JSON holds only UTF-8).
  EXPECT_EQ(entry->argv[4], "bad\xef\xbf\xbd" + std::string(122, 'b'));
  EXPECT_TRUE(client_->connection_status().ok());
}

TEST_F(AgentProcessTest, TheTableKeepsTheLast32EndedAndRefusesUnknownPids) {
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(client_->Exec(Sh("true")).ok());
  auto list = client_->ListProcesses();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 32u);
  auto result = Follow(999999);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace codebox::testing
