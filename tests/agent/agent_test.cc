// codebox-agent and AgentClient end to end: the agent runs as an ordinary child on a
// socketpair (no jail), so these tests need no privileges.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "agent_harness.h"
#include "base/io.h"

namespace codebox::testing {
namespace {

using namespace std::chrono_literals;
using protocol::AgentClient;
using protocol::ExecRequest;

const std::map<std::string, std::string> kEnv = {{"PATH", "/usr/local/bin:/usr/bin:/bin"},
                                                 {"HOME", "/tmp"}};

ExecRequest Sh(const std::string& script, std::chrono::milliseconds timeout = 10s) {
  ExecRequest r;
  r.exec.argv = {"/bin/sh", "-c", script};
  r.exec.env = kEnv;
  r.exec.cwd = "/tmp";
  r.exec.timeout = timeout;
  return r;
}

class AgentTest : public ConnectedAgentTest {
 protected:
  void SetUp() override {
    ConnectedAgentTest::SetUp();
    if (HasFatalFailure()) return;
    char dir[] = "/tmp/codebox-agent-test-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    client_.reset();
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }
  // Polls until the agent has no descendant left (killed processes take a moment to die).
  int DescendantsAfterSettling() {
    for (int i = 0; i < 100; ++i) {
      int n = agent_->CountDescendants();
      if (n == 0) return 0;
      std::this_thread::sleep_for(10ms);
    }
    return agent_->CountDescendants();
  }

  std::string dir_;
};

TEST_F(AgentTest, EchoAndExitCodes) {
  auto r = client_->Exec(Sh("echo hello; exit 3"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "hello\n");
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->signal, 0);
  EXPECT_FALSE(r->timed_out);
  auto killed = client_->Exec(Sh("kill -TERM $$"));
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ(killed->exit_code, -1);
  EXPECT_EQ(killed->signal, 15);
}

TEST_F(AgentTest, StderrApartFromStdoutAndStreamed) {
  std::string streamed;
  ExecRequest req = Sh("echo out; echo err >&2; echo out2");
  req.on_stdout = [&streamed](std::string_view chunk) { streamed.append(chunk); };
  auto r = client_->Exec(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "out\nout2\n");
  EXPECT_EQ(r->stderr_data, "err\n");
  EXPECT_EQ(streamed, "out\nout2\n");
}

TEST_F(AgentTest, EnvironmentIsExactlyTheRequested) {
  ExecRequest req = Sh("env | sort");
  req.exec.env = {{"PATH", "/usr/bin:/bin"}, {"ONLY", "this"}};
  auto r = client_->Exec(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "ONLY=this\nPATH=/usr/bin:/bin\nPWD=/tmp\n");
}

TEST_F(AgentTest, Stdin) {
  ExecRequest req = Sh("tr a-z A-Z; echo done");
  req.stdin_data = std::string(1 << 20, 'a') + "\n";
  auto r = client_->Exec(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, std::string(1 << 20, 'A') + "\ndone\n");
  // Without stdin the program reads /dev/null and does not hang.
  auto none = client_->Exec(Sh("cat; echo eof"));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->stdout_data, "eof\n");
}

TEST_F(AgentTest, TimeoutKillsAndReportsPromptly) {
  auto start = std::chrono::steady_clock::now();
  ExecRequest req;
  req.exec.argv = {"sleep", "100"};
  req.exec.env = kEnv;
  req.exec.timeout = 1s;
  auto r = client_->Exec(req);
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->signal, 9);
  EXPECT_LT(took, 1500ms);
  EXPECT_GE(took, 1000ms);
  EXPECT_EQ(DescendantsAfterSettling(), 0);
}

// The wire takes timeout_ms up to INT64_MAX; one just short of kNoTimeout is as good as none
// (and must not overflow the agent's clock: the asan-ubsan build checks that).
TEST_F(AgentTest, ATimeoutNoClockReachesIsNoTimeout) {
  for (auto timeout : {kNoTimeout - 1ms, std::chrono::milliseconds(INT64_MAX / 1000)}) {
    auto r = client_->Exec(Sh("echo ran", timeout));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->stdout_data, "ran\n");
    EXPECT_FALSE(r->timed_out);
  }
}

TEST_F(AgentTest, TimeoutKillsEscapedDaemons) {
  // Ignores SIGTERM; one daemon leaves the session (setsid), one also leaves its parent
  // (double fork, reparented to the agent).
  auto r = client_->Exec(
      Sh("trap '' TERM; setsid sleep 1000 & (setsid sleep 1001 &); sleep 1000", 500ms));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(DescendantsAfterSettling(), 0);
}

TEST_F(AgentTest, BackgroundChildHoldingPipesDoesNotBlockResult) {
  auto start = std::chrono::steady_clock::now();
  auto r = client_->Exec(Sh("sleep 5 & echo started"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "started\n");
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
}

TEST_F(AgentTest, OutputLimitKeepsExactlyTheCap) {
  ExecRequest req = Sh("head -c 100000000 /dev/zero; echo tail >&2", 30s);
  req.exec.output_limit = 1 << 20;
  auto r = client_->Exec(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data.size(), 1u << 20);
  EXPECT_TRUE(r->output_truncated);
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stderr_data, "tail\n");
}

TEST_F(AgentTest, TwentyExecsAtOnce) {
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  std::vector<StatusOr<ExecResult>> results(20, Internal("not run"));
  for (int i = 0; i < 20; ++i) {
    threads.emplace_back([this, i, &results] {
      results[i] = client_->Exec(Sh("sleep 0.5; echo " + std::to_string(i)));
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status().ToString();
    EXPECT_EQ(results[i]->stdout_data, std::to_string(i) + "\n");
  }
  // Run one after the other they would take 10 s.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST_F(AgentTest, MissingBinaryIs127WithMessage) {
  ExecRequest req;
  req.exec.argv = {"python4-does-not-exist"};
  req.exec.env = kEnv;
  auto r = client_->Exec(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 127);
  EXPECT_EQ(r->stderr_data,
            "codebox-agent: exec python4-does-not-exist: No such file or directory\n");
}

TEST_F(AgentTest, FileRoundTripFiftyMegabytes) {
  std::string data(50u << 20, '\0');
  std::mt19937_64 rng(42);
  for (size_t i = 0; i + 8 <= data.size(); i += 8) {
    uint64_t v = rng();
    std::memcpy(&data[i], &v, 8);
  }
  std::string host_in = dir_ + "/in.bin", box = dir_ + "/box/sub/file.bin",
              host_out = dir_ + "/out.bin";
  ASSERT_TRUE(base::WriteFile(host_in, data).ok());
  Status up = client_->WriteFileFromHost(host_in, box);
  ASSERT_TRUE(up.ok()) << up.ToString();
  base::UniqueFd out(::open(host_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  ASSERT_TRUE(out.valid());
  Status down = client_->ReadFileStream(
      box, data.size(), [](uint64_t, uint32_t) { return Status::Ok(); },
      [&out](std::string_view chunk) { return base::WriteAll(out.get(), chunk); });
  ASSERT_TRUE(down.ok()) << down.ToString();
  auto back = base::ReadFile(host_out);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == data) << "round trip differs";
  auto direct = client_->ReadFile(box);
  ASSERT_TRUE(direct.ok());
  EXPECT_TRUE(*direct == data);
}

TEST_F(AgentTest, SmallFilesListDirMkdir) {
  ASSERT_TRUE(client_->MakeDir(dir_ + "/a/b").ok());
  ASSERT_TRUE(client_->WriteFile(dir_ + "/a/b/x.txt", "hello", 0600).ok());
  ASSERT_TRUE(client_->WriteFile(dir_ + "/a/empty", "").ok());
  auto text = client_->ReadFile(dir_ + "/a/b/x.txt");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "hello");
  auto entries = client_->ListDir(dir_ + "/a/b");
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);  // no temp file left beside it
  EXPECT_EQ((*entries)[0].name, "x.txt");
  EXPECT_EQ((*entries)[0].type, "file");
  EXPECT_EQ((*entries)[0].size, 5u);
  EXPECT_EQ((*entries)[0].mode, 0600u);
  auto empty = client_->ReadFile(dir_ + "/a/empty");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, "");
}

// 20k names of 200 bytes: about 5 MiB of listing JSON, far over one frame; the agent pages it.
TEST_F(AgentTest, ListDirOfManyLongNamesIsPaged) {
  const std::string big = dir_ + "/big";
  ASSERT_EQ(::mkdir(big.c_str(), 0755), 0);
  constexpr int kFiles = 20000;
  for (int i = 0; i < kFiles; ++i) {
    std::string name = std::to_string(i);
    name += std::string(200 - name.size(), 'n');
    base::UniqueFd fd(::open((big + "/" + name).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd.valid());
  }
  auto entries = client_->ListDir(big);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  EXPECT_EQ(entries->size(), static_cast<size_t>(kFiles));
  for (const auto& e : *entries) ASSERT_EQ(e.name.size(), 200u);
  // The host's cap holds whatever the agent sends.
  auto capped = client_->ListDir(big, 1000);
  EXPECT_EQ(capped.status().code(), StatusCode::kLimitExceeded) << capped.status().ToString();
  EXPECT_TRUE(client_->connection_status().ok());
  EXPECT_TRUE(client_->Exec(Sh("true")).ok());
}

TEST_F(AgentTest, ReadFileOverTheCapIsLimitExceeded) {
  ASSERT_TRUE(client_->WriteFile(dir_ + "/two-mib", std::string(2u << 20, 'z')).ok());
  auto r = client_->ReadFile(dir_ + "/two-mib", 1u << 20);
  EXPECT_EQ(r.status().code(), StatusCode::kLimitExceeded) << r.status().ToString();
  auto ok = client_->ReadFile(dir_ + "/two-mib", 2u << 20);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->size(), 2u << 20);
}

TEST_F(AgentTest, SilentExecWithoutTimeoutOutlivesTheIdleDeadline) {
  client_->set_idle_timeout(200ms);  // the host asks the agent whether it still runs
  auto r = client_->Exec(Sh("sleep 1; echo done", kNoTimeout));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "done\n");
}

TEST_F(AgentTest, NulInArgvIsRefused) {
  ExecRequest r = Sh("true");
  r.exec.argv.push_back(std::string("a\0b", 3));
  auto result = client_->Exec(r);
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument) << result.status().ToString();
}

TEST_F(AgentTest, FileErrorsAreClear) {
  auto missing = client_->ReadFile(dir_ + "/nope.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir_ + "/nope.txt"), std::string::npos)
      << missing.status().message();
  auto list = client_->ListDir(dir_ + "/nodir");
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(client_->WriteFile(dir_ + "/file", "x").ok());
  Status mk = client_->MakeDir(dir_ + "/file/sub");
  EXPECT_FALSE(mk.ok());
  EXPECT_NE(mk.message().find(dir_ + "/file"), std::string::npos) << mk.ToString();
  auto dir_read = client_->ReadFile(dir_);
  EXPECT_EQ(dir_read.status().code(), StatusCode::kInvalidArgument);
  Status host_missing = client_->WriteFileFromHost(dir_ + "/no-host-file", dir_ + "/x");
  EXPECT_EQ(host_missing.code(), StatusCode::kIoError);
  // The connection is still fine after all of these.
  EXPECT_TRUE(client_->connection_status().ok());
  EXPECT_TRUE(client_->Exec(Sh("true")).ok());
}

TEST_F(AgentTest, ShutdownKillsEverythingAndEnds) {
  std::thread runner([this] { (void)client_->Exec(Sh("sleep 100 & sleep 100")); });
  while (agent_->CountDescendants() < 2) std::this_thread::sleep_for(5ms);
  Status st = client_->Shutdown();
  runner.join();
  EXPECT_TRUE(st.ok()) << st.ToString();
  int status = agent_->WaitExit(2000);
  ASSERT_NE(status, -1);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto later = client_->Exec(Sh("true"));
  EXPECT_EQ(later.status().code(), StatusCode::kBoxCrashed) << later.status().ToString();
}

}  // namespace
}  // namespace codebox::testing
