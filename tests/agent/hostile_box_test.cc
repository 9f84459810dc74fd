// Attacks from inside a real jail box: a hostile agent (tests/agent/hostile_agent_main.cc)
// runs as PID 1 of the box in place of codebox-agent, as box code that took the agent over
// would, and attacks the host library through the protocol. The Box and its
// AgentClient must keep only their caps, refuse forged results with a clear kProtocolError,
// and keep the host process alive.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "testing/box_test_util.h"
#include "tests/common/rss.h"

namespace codebox {
namespace {

using namespace std::chrono_literals;


using testing::kRssIsMeaningful;
using testing::PeakRss;
using testing::ResetPeakRss;

class HostileBoxTest : public ::testing::Test {
 protected:
  // Boxes made in this binary get the hostile agent as their agent.
  static void SetUpTestSuite() {
    if (const char* v = std::getenv("CODEBOX_AGENT")) saved_ = v;
    ::setenv("CODEBOX_AGENT", CODEBOX_HOSTILE_AGENT, 1);
  }
  static void TearDownTestSuite() {
    if (saved_.empty()) {
      ::unsetenv("CODEBOX_AGENT");
    } else {
      ::setenv("CODEBOX_AGENT", saved_.c_str(), 1);
    }
  }
  static BoxOptions Options() {
    BoxOptions options = testing::TestBoxOptions();
    options.output_limit_bytes = 1u << 20;
    return options;
  }
  static inline std::string saved_;
};

TEST_F(HostileBoxTest, FiftyMegabytesOfStdoutKeepOnlyTheCap) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  ResetPeakRss();
  uint64_t before = PeakRss();
  size_t streamed = 0;
  ExecOptions opts;
  opts.on_stdout = [&streamed](std::string_view piece) { streamed += piece.size(); };
  auto r = box->Exec({"flood"}, opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data.size(), 1u << 20);
  EXPECT_EQ(streamed, 1u << 20);
  EXPECT_TRUE(r->output_truncated) << "the agent claimed no truncation; the host counted";
  uint64_t growth = PeakRss() - before;
  if (kRssIsMeaningful) {
    EXPECT_LT(growth, 32u << 20) << "host kept " << growth << " bytes for 50 MiB";
  }
}

TEST_F(HostileBoxTest, MistypedExitIsAProtocolErrorNotACrash) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  auto r = box->Exec({"mistyped"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kProtocolError) << r.status().ToString();
  EXPECT_NE(r.status().message().find("exit_code"), std::string::npos) << r.status().ToString();
  // The box is done for; the host process is not.
  auto again = box->Exec({"true"});
  EXPECT_FALSE(again.ok());
}

TEST_F(HostileBoxTest, SecondExitEndsTheBoxConnection) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  auto first = box->Exec({"second-exit"});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->exit_code, 0);
  std::this_thread::sleep_for(200ms);
  auto again = box->Exec({"true"});
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("second exit"), std::string::npos)
      << again.status().ToString();
}

TEST_F(HostileBoxTest, ExitForAStreamNeverOpenedIsRefused) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  auto r = box->Exec({"foreign-exit"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kProtocolError) << r.status().ToString();
  EXPECT_NE(r.status().message().find("never opened"), std::string::npos) << r.status().ToString();
}

// The process table as a hijacked agent in a real box tells it: 300 entries, past the 256 the
// host accepts, are refused whole, and the box's connection ends; the host process goes on.
TEST_F(HostileBoxTest, AnOversizedProcessTableIsRefused) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  auto listed = box->Processes();
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.status().code(), StatusCode::kProtocolError) << listed.status().ToString();
  EXPECT_NE(listed.status().message().find("more than 256"), std::string::npos)
      << listed.status().ToString();
  EXPECT_FALSE(box->Exec({"true"}).ok()) << "the box is done for";
}

// An attacher gets at most the box's output limit, whatever the agent sends.
TEST_F(HostileBoxTest, AnAttacherKeepsOnlyTheCap) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());  // output limit 1 MiB
  auto process = box->Attach(5);
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  auto r = (*process)->Wait();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data.size(), 1u << 20);
  EXPECT_TRUE(r->output_truncated);
}

TEST_F(HostileBoxTest, AStartedTwiceEndsTheConnection) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  auto r = box->Exec({"started-twice"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kProtocolError) << r.status().ToString();
  EXPECT_NE(r.status().message().find("started"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace codebox
