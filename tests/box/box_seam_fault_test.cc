// What a Box reports when its agent or its backend misbehaves, through the BoxEnv seam: OOM
// kills, output limits, an agent that dies or lies, and copy in and out. No root, no image.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "seam_fixture.h"

namespace codebox::testing {
namespace {

using protocol::FrameType;
using protocol::Json;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Spit(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

// Counts an OOM kill in the backend when the exec request passes (as the cgroup would).
Tamper CountOomOnExec(FakeBoxState& state) {
  return [&state](Direction dir, protocol::Frame& f) {
    if (dir == Direction::kToAgent && RequestOf(f) == "exec") ++state.oom_kills;
    return Verdict::kForward;
  };
}

TEST_F(SeamTest, OomFromTheBackendsCount) {
  env_.tamper = CountOomOnExec(state());
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto r = box->Exec({"sh", "-c", "kill -KILL $$"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->signal, SIGKILL);
  EXPECT_TRUE(r->out_of_memory) << "SIGKILL while the cgroup counted an OOM kill";
  EXPECT_FALSE(r->ok());
  // An exit that is not a SIGKILL is not an OOM kill, whatever the count did meanwhile.
  auto clean = box->Exec({"true"});
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  EXPECT_FALSE(clean->out_of_memory);
}

TEST_F(SeamTest, SigkillWithoutAnOomCountIsNotOom) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto r = box->Exec({"sh", "-c", "kill -KILL $$"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->signal, SIGKILL);
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_FALSE(r->out_of_memory);
}

TEST_F(SeamTest, OomFromTheAgent) {
  env_.tamper = [](Direction dir, protocol::Frame& f) {
    if (dir == Direction::kToHost && EventOf(f) == "exit") {
      EditControl(f, [](Json& j) { j["out_of_memory"] = true; });
    }
    return Verdict::kForward;
  };
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto r = box->Exec({"sh", "-c", "kill -KILL $$"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->out_of_memory);
}

TEST_F(SeamTest, OutputLimitIsReported) {
  options_.output_limit_bytes = 1000;
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto r = box->Exec({"sh", "-c", "head -c 5000 /dev/zero; head -c 10 /dev/zero >&2"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data.size(), 1000u);
  EXPECT_EQ(r->stderr_data.size(), 10u);
  EXPECT_TRUE(r->output_truncated);
  EXPECT_EQ(r->exit_code, 0);
}

TEST_F(SeamTest, OutputLimitHoldsAgainstAnAgentThatIgnoresIt) {
  options_.output_limit_bytes = 1000;
  env_.tamper = [](Direction dir, protocol::Frame& f) {
    if (dir == Direction::kToAgent && RequestOf(f) == "exec") {
      EditControl(f, [](Json& j) { j["output_limit"] = 1 << 20; });
    }
    if (dir == Direction::kToHost && EventOf(f) == "exit") {
      EditControl(f, [](Json& j) { j["output_truncated"] = false; });
    }
    return Verdict::kForward;
  };
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto r = box->Exec({"head", "-c", "5000", "/dev/zero"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data.size(), 1000u) << "the host counts for itself";
  EXPECT_TRUE(r->output_truncated);
}

TEST_F(SeamTest, AgentDyingMidExecIsReportedWithDiagnostics) {
  env_.tamper = [](Direction dir, protocol::Frame& f) {
    return dir == Direction::kToHost && f.type == FrameType::kStdout ? Verdict::kKillAgent
                                                                     : Verdict::kForward;
  };
  state().set_diagnostics("last lines of the guest console:\n\x1b[2Jkernel panic");
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto r = box->Exec({"sh", "-c", "echo started; sleep 30"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kBoxCrashed) << r.status().ToString();
  const std::string& m = r.status().message();
  EXPECT_EQ(m.rfind("exec sh: ", 0), 0u) << m;
  EXPECT_NE(m.find("kernel panic"), std::string::npos) << "the backend's diagnostics: " << m;
  EXPECT_EQ(m.find('\x1b'), std::string::npos) << "diagnostics are box text, made safe: " << m;
  // The box stays dead, with the same explanation; Destroy still works.
  auto again = box->Exec({"true"});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kBoxCrashed) << again.status().ToString();
  EXPECT_TRUE(box->Destroy().ok());
}

TEST_F(SeamTest, AgentDyingBeforeHelloFailsCreate) {
  env_.tamper = [](Direction dir, protocol::Frame& f) {
    return dir == Direction::kToHost && f.type == FrameType::kHello ? Verdict::kKillAgent
                                                                    : Verdict::kForward;
  };
  state().set_diagnostics("jail log: agent exited 1");
  auto box = box::CreateBox(options_, env_);
  ASSERT_FALSE(box.ok());
  EXPECT_NE(box.status().message().find("connect to agent"), std::string::npos)
      << box.status().ToString();
  EXPECT_NE(box.status().message().find("agent exited 1"), std::string::npos)
      << box.status().ToString();
  EXPECT_EQ(state().destroy_calls, 1);
}

TEST_F(SeamTest, ImpossibleExitIsAProtocolError) {
  env_.tamper = [](Direction dir, protocol::Frame& f) {
    if (dir == Direction::kToHost && EventOf(f) == "exit") {
      EditControl(f, [](Json& j) { j["exit_code"] = int64_t{1} << 40; });
    }
    return Verdict::kForward;
  };
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto r = box->Exec({"true"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kProtocolError) << r.status().ToString();
  EXPECT_NE(r.status().message().find("exit_code"), std::string::npos) << r.status().ToString();
}

TEST_F(SeamTest, AFrameOverTheSizeLimitIsAProtocolError) {
  env_.tamper = [](Direction dir, protocol::Frame& f) {
    return dir == Direction::kToHost && f.type == FrameType::kStdout ? Verdict::kOversize
                                                                     : Verdict::kForward;
  };
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto start = Clock::now();
  auto r = box->Exec({"sh", "-c", "echo out; sleep 30"});
  ASSERT_FALSE(r.ok());
  EXPECT_LT(Seconds(start), 5) << "refused at the header, not after waiting for the payload";
  EXPECT_EQ(r.status().code(), StatusCode::kProtocolError) << r.status().ToString();
  EXPECT_EQ(box->Exec({"true"}).status().code(), StatusCode::kProtocolError)
      << "the connection cannot be framed again";
}

TEST_F(SeamTest, CopyInAndOutThroughTheAgent) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  std::filesystem::create_directories(tmp_ + "/host/sub");
  Spit(tmp_ + "/host/a.txt", "alpha");
  Spit(tmp_ + "/host/sub/b.bin", std::string(300'000, 'b'));  // more than one data frame
  ASSERT_TRUE(box->CopyIn(tmp_ + "/host", "in").ok());
  auto seen = box->Exec({"cat", "in/a.txt"});
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ(seen->stdout_data, "alpha");
  auto made = box->Exec({"sh", "-c", "mkdir -p out && echo made > out/c.txt"});
  ASSERT_TRUE(made.ok() && made->exit_code == 0);
  ASSERT_TRUE(box->CopyOut("in", tmp_ + "/back").ok());
  EXPECT_EQ(Slurp(tmp_ + "/back/a.txt"), "alpha");
  EXPECT_EQ(Slurp(tmp_ + "/back/sub/b.bin"), std::string(300'000, 'b'));
  ASSERT_TRUE(box->CopyOut(options_.workdir + "/out/c.txt", tmp_ + "/c.txt").ok());
  EXPECT_EQ(Slurp(tmp_ + "/c.txt"), "made\n");
}

TEST_F(SeamTest, CopyOutRefusesAnImpossibleSizeAndLeavesNothing) {
  env_.tamper = [](Direction dir, protocol::Frame& f) {
    if (dir == Direction::kToHost && EventOf(f) == "file") {
      EditControl(f, [](Json& j) { j["size"] = int64_t{1} << 50; });
    }
    return Verdict::kForward;
  };
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto made = box->Exec({"sh", "-c", "echo small > f.txt"});
  ASSERT_TRUE(made.ok() && made->exit_code == 0);
  Status st = box->CopyOut("f.txt", tmp_ + "/f.txt");
  EXPECT_EQ(st.code(), StatusCode::kLimitExceeded) << st.ToString();
  EXPECT_FALSE(std::filesystem::exists(tmp_ + "/f.txt"));
}

// The agent claims a small file, then sends more than the copy may write.
TEST_F(SeamTest, CopyOutCountsTheBytesThatArriveNotTheClaim) {
  env_.tamper = [](Direction dir, protocol::Frame& f) {
    if (dir == Direction::kToHost && f.type == FrameType::kData && !f.payload.empty()) {
      f.payload += std::string(200, 'x');
    }
    return Verdict::kForward;
  };
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto made = box->Exec({"sh", "-c", "echo small > f.txt"});
  ASSERT_TRUE(made.ok() && made->exit_code == 0);
  CopyOutOptions limits;
  limits.max_bytes = 100;
  Status st = box->CopyOut("f.txt", tmp_ + "/f.txt", limits);
  EXPECT_EQ(st.code(), StatusCode::kLimitExceeded) << st.ToString();
  EXPECT_FALSE(std::filesystem::exists(tmp_ + "/f.txt")) << st.ToString();
}

}  // namespace
}  // namespace codebox::testing
