// The interpreter loop end to end: the real HTTP client against the scripted server, and
// code running in a real box ("box"; skipped with the reason where this host cannot make
// one) or, to test the loop itself anywhere, in host python with an empty environment
// ("host").
#include "llm/interpreter.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fake_server.h"
#include "host_runner.h"

namespace codebox::llm {
namespace {

using nlohmann::json;
using testing::FakeServer;

// Whether this host can make a box, asked once.
const Status& BoxAvailability() {
  static const Status status = [] {
    auto runner = OpenBoxRunner(BoxOptions{});
    return runner.ok() ? Status::Ok() : runner.status();
  }();
  return status;
}

class InterpreterTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "box" && !BoxAvailability().ok()) {
      GTEST_SKIP() << "no box on this host: " << BoxAvailability().ToString();
    }
  }

  bool InBox() const { return GetParam() == "box"; }

  InterpreterOptions Options(const std::string& scenario) {
    Status s = server_.Start(scenario);
    EXPECT_TRUE(s.ok()) << s.ToString();
    InterpreterOptions o;
    o.base_url = server_.base_url();
    o.api_key = "sk-test-key";
    o.model = "fake-model";
    o.initial_backoff = std::chrono::milliseconds(20);
    o.max_retries = 1;
    o.on_text = [this](std::string_view t) { streamed_ += t; };
    o.on_notice = [this](std::string_view n) { notices_.emplace_back(n); };
    if (!InBox()) {
      o.runner_factory = [](const BoxOptions&) -> StatusOr<std::unique_ptr<CodeRunner>> {
        return testing::MakeHostPythonRunner();
      };
    }
    return o;
  }

  // The tool messages the model got back, in order, parsed.
  std::vector<json> ToolResultsSent() {
    auto requests = server_.Requests();
    std::vector<json> results;
    if (requests.empty()) return results;
    for (const json& m : requests.back()["body"]["messages"]) {
      if (m["role"] == "tool") results.push_back(json::parse(m["content"].get<std::string>()));
    }
    return results;
  }

  FakeServer server_;
  std::string streamed_;
  std::vector<std::string> notices_;
};

TEST_P(InterpreterTest, ToolCallThenAnswer) {
  Interpreter interpreter(Options("tool_then_answer.json"));
  auto t = interpreter.Ask("sum 0..100");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->stop_reason, "answer");
  EXPECT_EQ(t->mode, "tools");
  EXPECT_EQ(t->answer, "The sum of 0..100 is 5050.");
  EXPECT_EQ(streamed_, t->answer);
  ASSERT_EQ(t->steps.size(), 2u);
  ASSERT_TRUE(t->steps[0].result);
  EXPECT_EQ(t->steps[0].result->stdout_data, "5050\n");
  auto results = ToolResultsSent();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0]["stdout"], "5050\n");
  EXPECT_EQ(results[0]["exit_code"], 0);
  EXPECT_EQ(server_.Requests()[0]["body"]["tools"][0]["function"]["name"], "run_python");
  json transcript = json::parse(t->ToJson());
  EXPECT_EQ(transcript["steps"][0]["result"]["stdout"], "5050\n");
  EXPECT_EQ(transcript["messages"].size(), 5u);  // system, user, call, result, answer
  if (InBox()) {
    EXPECT_FALSE(t->driver.empty());
  }
}

TEST_P(InterpreterTest, RepairsAfterATraceback) {
  Interpreter interpreter(Options("repair_after_traceback.json"));
  auto t = interpreter.Ask("10!");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->answer, "10! = 3628800");
  auto results = ToolResultsSent();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_NE(results[0]["exit_code"], 0);
  EXPECT_NE(results[0]["stderr"].get<std::string>().find("AttributeError"), std::string::npos);
  EXPECT_EQ(results[1]["stdout"], "3628800\n");
}

TEST_P(InterpreterTest, MalformedArgumentsGoBackAsAClearErrorAndTheLoopGoesOn) {
  Interpreter interpreter(Options("malformed_arguments.json"));
  auto t = interpreter.Ask("6*7");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->answer, "42");
  auto results = ToolResultsSent();
  ASSERT_EQ(results.size(), 2u);
  ASSERT_TRUE(results[0].contains("error"));
  EXPECT_NE(results[0]["error"].get<std::string>().find("not valid JSON"), std::string::npos);
  EXPECT_EQ(results[1]["stdout"], "42\n");
  EXPECT_FALSE(t->steps[0].error.empty());
  EXPECT_FALSE(t->steps[0].result);
}

TEST_P(InterpreterTest, ServerWithoutToolsFallsBackToOneShot) {
  InterpreterOptions o = Options("no_tools_fenced.json");
  Interpreter interpreter(o);
  auto t = interpreter.Ask("2**10");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->mode, "oneshot");
  EXPECT_EQ(t->answer, "1024\n");
  EXPECT_EQ(streamed_, "1024\n");  // the program's output, not the code
  auto requests = server_.Requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_TRUE(requests[0]["body"].contains("tools"));
  EXPECT_FALSE(requests[1]["body"].contains("tools"));
  ASSERT_FALSE(notices_.empty());
  EXPECT_NE(notices_[0].find("falling back to oneshot"), std::string::npos);
}

TEST_P(InterpreterTest, FencedBlockInsteadOfToolCallRunsWithOneRepair) {
  Interpreter interpreter(Options("fenced_instead_of_tool.json"));
  auto t = interpreter.Ask("1/4");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->mode, "oneshot");
  EXPECT_EQ(t->answer, "0.25\n");
  ASSERT_EQ(t->steps.size(), 2u);
  EXPECT_EQ(t->steps[1].kind, "repair");
  auto requests = server_.Requests();
  ASSERT_EQ(requests.size(), 2u);
  std::string repair = requests[1]["body"]["messages"].back()["content"];
  EXPECT_NE(repair.find("ZeroDivisionError"), std::string::npos);
}

TEST_P(InterpreterTest, OneShotModeNeverSendsTools) {
  InterpreterOptions o = Options("no_tools_fenced.json");
  o.mode = Mode::kOneShot;
  Interpreter interpreter(o);
  auto t = interpreter.Ask("2**10");
  // The first scripted reply rejects tools only when they are sent; here it answers "unused".
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->mode, "oneshot");
  EXPECT_EQ(t->answer, "unused");  // no code block: prose is the answer
  EXPECT_FALSE(server_.Requests()[0]["body"].contains("tools"));
}

TEST_P(InterpreterTest, StepLimitStopsTheLoop) {
  InterpreterOptions o = Options("step_limit.json");
  o.max_steps = 3;
  Interpreter interpreter(o);
  auto t = interpreter.Ask("loop forever");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->stop_reason, "step_limit");
  EXPECT_FALSE(t->ok());
  EXPECT_EQ(server_.Requests().size(), 3u);
  int runs = 0;
  for (const Step& s : t->steps) runs += s.result ? 1 : 0;
  EXPECT_EQ(runs, 2);
}

TEST_P(InterpreterTest, SecretsStayOutOfTheBox) {
  const std::string secret = "sk-SECRET-" + std::to_string(getpid()) + "-never-in-box";
  setenv("OPENAI_API_KEY", secret.c_str(), 1);
  setenv("CODEBOX_TEST_HOST_SECRET", "host-secret-value", 1);
  InterpreterOptions o = Options("secrets_stay_out.json");
  o.api_key = "";  // taken from OPENAI_API_KEY, as the CLI does
  Interpreter interpreter(o);
  auto t = interpreter.Ask("print the environment");
  unsetenv("OPENAI_API_KEY");
  unsetenv("CODEBOX_TEST_HOST_SECRET");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto requests = server_.Requests();
  ASSERT_EQ(requests.size(), 2u);
  // The key was used to talk to the server...
  EXPECT_EQ(requests[0]["headers"]["Authorization"], "Bearer " + secret);
  // ...but the code, which printed its whole environment, never saw it.
  ASSERT_TRUE(t->steps[0].result);
  const std::string& printed = t->steps[0].result->stdout_data;
  EXPECT_NE(printed.find("{"), std::string::npos);  // it did print an environment
  EXPECT_EQ(printed.find(secret), std::string::npos);
  EXPECT_EQ(printed.find("host-secret-value"), std::string::npos);
  EXPECT_EQ(requests[1]["body"].dump().find(secret), std::string::npos);
  EXPECT_EQ(t->ToJson().find(secret), std::string::npos);
}

TEST_P(InterpreterTest, FilesGoInAndResultsComeOut) {
  if (!InBox()) GTEST_SKIP() << "needs a box for /data and /work";
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("codebox_llm_files_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "input.csv") << "a,b\n1,2\n3,4\n";
  InterpreterOptions o = Options("files_persist.json");
  o.input_files = {(dir / "input.csv").string()};
  o.output_dir = (dir / "out").string();
  Interpreter interpreter(o);
  auto t = interpreter.Ask("count lines");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto results = ToolResultsSent();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0]["stdout"], "saved\n");
  EXPECT_EQ(results[1]["stdout"], "3\n");  // the file written by step 1 is there in step 2
  EXPECT_TRUE(fs::exists(dir / "out" / "result.txt"));
  std::string system = server_.Requests()[0]["body"]["messages"][0]["content"];
  EXPECT_NE(system.find("/data/input.csv"), std::string::npos);
  fs::remove_all(dir);
}

// Hard links give one 40 MiB file eleven names in /work: copied out one name at a time, each
// must not get a budget of its own (that would put 440 MiB on the host from a 256 MiB box).
TEST_P(InterpreterTest, OutputsShareOneCopyOutBudget) {
  if (!InBox()) GTEST_SKIP() << "needs a box for /work";
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("codebox_llm_links_" + std::to_string(getpid()));
  fs::remove_all(dir);
  InterpreterOptions o = Options("outputs_hardlinks.json");
  o.output_dir = (dir / "out").string();
  Interpreter interpreter(o);
  auto t = interpreter.Ask("make links");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kLimitExceeded) << t.status().ToString();
  uint64_t written = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir / "out")) {
    if (e.is_regular_file()) written += e.file_size();
  }
  EXPECT_LE(written, 256u << 20);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Runners, InterpreterTest, ::testing::Values("box", "host"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace codebox::llm
