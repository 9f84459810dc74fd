// The interpreter loop end to end: the real HTTP client against the scripted server, and
// cells running in a real box's session ("box"; skipped with the reason where this host
// cannot make one) or, to test the loop itself anywhere, in host IPython with an empty
// environment ("host", tests/llm/host_kernel.py).
#include "llm/interpreter.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fake_server.h"
#include "host_runner.h"
#include "llm/tools.h"

namespace codebox::llm {
namespace {

using nlohmann::json;
using testing::FakeServer;

namespace fs = std::filesystem;

// Whether this host can make a box, asked once.
const Status& BoxAvailability() {
  static const Status status = [] {
    auto runner = OpenBoxRunner(BoxOptions{});
    return runner.ok() ? Status::Ok() : runner.status();
  }();
  return status;
}

// Whether host_kernel.py can run here: it needs IPython on the host (python3-ipython).
bool HostHasIPython() {
  static const bool has = std::system("/usr/bin/python3 -c 'import IPython' 2>/dev/null") == 0;
  return has;
}

// Whether a box of the python-data image (numpy, pandas, matplotlib) starts here.
const Status& DataImageAvailability() {
  static const Status status = [] {
    BoxOptions o;
    o.image = "python-data";
    auto runner = OpenBoxRunner(o);
    return runner.ok() ? Status::Ok() : runner.status();
  }();
  return status;
}

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A fresh directory for one test's files, removed with the test.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(fs::temp_directory_path() / (name + "_" + std::to_string(getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

class InterpreterTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "box" && !BoxAvailability().ok()) {
      GTEST_SKIP() << "no box on this host: " << BoxAvailability().ToString();
    }
    if (GetParam() == "host" && !HostHasIPython()) {
      GTEST_SKIP() << "no IPython on this host for tests/llm/host_kernel.py "
                      "(apt-get install python3-ipython)";
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
    o.on_turn = [this](int step, std::string_view model) {
      turns_.push_back(std::to_string(step) + " " + std::string(model));
    };
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
  std::vector<std::string> turns_;  // "STEP MODEL" for each model turn, as on_turn said
};

TEST_P(InterpreterTest, ToolCallThenAnswer) {
  Interpreter interpreter(Options("tool_then_answer.json"));
  auto t = interpreter.Ask("sum 0..100");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->stop_reason, "answer");
  EXPECT_EQ(t->mode, "tools");
  EXPECT_EQ(t->answer, "The sum of 0..100 is 5050.");
  EXPECT_EQ(streamed_, t->answer);
  EXPECT_EQ(turns_, (std::vector<std::string>{"1 fake-model", "2 fake-model"}));
  ASSERT_EQ(t->steps.size(), 2u);
  ASSERT_TRUE(t->steps[0].result);
  EXPECT_EQ(JoinChunks(t->steps[0].result->stdout_chunks), "5050\n");
  auto results = ToolResultsSent();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0]["stdout"], "5050\n");
  EXPECT_EQ(results[0]["error"], nullptr);
  EXPECT_EQ(results[0]["result"], nullptr);  // print() returns None: no value to show
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
  // The model got the exception's name, value and the traceback pointing at its typo.
  ASSERT_TRUE(results[0]["error"].is_object()) << results[0].dump();
  EXPECT_EQ(results[0]["error"]["name"], "AttributeError");
  EXPECT_NE(results[0]["error"]["value"].get<std::string>().find("factorail"), std::string::npos);
  std::string traceback = results[0]["error"]["traceback"];
  EXPECT_NE(traceback.find("math.factorail(10)"), std::string::npos) << traceback;
  EXPECT_EQ(results[1]["error"], nullptr);
  EXPECT_EQ(results[1]["stdout"], "3628800\n");
}

TEST_P(InterpreterTest, VariablesPersistFromStepToStep) {
  Interpreter interpreter(Options("state_persists.json"));
  auto t = interpreter.Ask("x");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto results = ToolResultsSent();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0]["stdout"], "x is set\n");
  // Step 2 is only "x + 1": x came from step 1, and the last expression's value is shown.
  EXPECT_EQ(results[1]["error"], nullptr) << results[1].dump();
  EXPECT_EQ(results[1]["result"], "43");
  EXPECT_EQ(t->steps[1].result->text(), "43");
  std::string system = server_.Requests()[0]["body"]["messages"][0]["content"];
  EXPECT_NE(system.find("persist"), std::string::npos);
  EXPECT_NE(system.find("plt.show()"), std::string::npos);
  json step = json::parse(t->ToJson())["steps"][1];
  EXPECT_EQ(step["result"]["text"], "43");
  EXPECT_EQ(step["images"], json::array());
}

TEST_P(InterpreterTest, OneShotAnswerIsOutputAndLastValue) {
  InterpreterOptions o = Options("oneshot_expression.json");
  o.mode = Mode::kOneShot;
  Interpreter interpreter(o);
  auto t = interpreter.Ask("sum 1..4");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->answer, "summing\n10\n");
  EXPECT_EQ(streamed_, t->answer);
  std::string system = server_.Requests()[0]["body"]["messages"][0]["content"];
  EXPECT_NE(system.find("cell of a Python session"), std::string::npos);
}

// The chart the cell displays is saved by the host under its own name, in --out when given
// (box) or a fresh temporary directory named in a notice (host); the model learns its size
// and name, and the transcript lists it.
TEST_P(InterpreterTest, ChartIsSavedAndTheModelToldItsName) {
  ScratchDir scratch("codebox_llm_chart");
  InterpreterOptions o = Options("chart_image.json");
  if (InBox()) o.output_dir = (scratch.path() / "out").string();
  Interpreter interpreter(o);
  auto t = interpreter.Ask("make a chart");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  if (!InBox()) {
    ASSERT_FALSE(t->image_dir.empty());
    EXPECT_EQ(fs::path(t->image_dir).filename().string().rfind("codebox-ask-", 0), 0u);
    bool named = false;
    for (const std::string& n : notices_)
      named = named || n.find(t->image_dir) != std::string::npos;
    EXPECT_TRUE(named) << "no notice names " << t->image_dir;
  } else {
    EXPECT_EQ(t->image_dir, o.output_dir);
  }
  fs::path chart = fs::path(t->image_dir) / "chart-1.png";
  std::string png = Slurp(chart);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  auto results = ToolResultsSent();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0]["images"], json::array({"[image/png 64x48 saved as chart-1.png]"}))
      << results[0].dump();
  EXPECT_EQ(results[0]["stdout"], "shown\n");
  EXPECT_EQ(results[1]["result"], std::to_string(png.size()));  // the bytes the cell made
  if (InBox()) {
    // Step 2 left a file named chart-1.png in /work: copying /work out must not replace the
    // chart (png was read after the copy-out).
    bool told = false;
    for (const std::string& n : notices_) told = told || n.find("not copied") != std::string::npos;
    EXPECT_TRUE(told);
  }
  json images = json::parse(t->ToJson())["steps"][0]["images"];
  ASSERT_EQ(images.size(), 1u);
  EXPECT_EQ(images[0]["path"], chart.string());
  EXPECT_EQ(images[0]["mime"], "image/png");
  EXPECT_EQ(images[0]["width"], 64);
  EXPECT_EQ(images[0]["height"], 48);
  EXPECT_EQ(images[0]["bytes"], png.size());
  if (!InBox()) fs::remove_all(t->image_dir);
}

TEST_P(InterpreterTest, HostileImagesAreLeftOutOrDoubtedNeverACrash) {
  ScratchDir scratch("codebox_llm_hostile");
  InterpreterOptions o = Options("hostile_images.json");
  // The host runner has no workdir to copy out: its images go to the temporary directory.
  if (InBox()) o.output_dir = (scratch.path() / "out").string();
  Interpreter interpreter(o);
  auto t = interpreter.Ask("show images");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto results = ToolResultsSent();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0]["stdout"], "displayed\n") << results[0].dump();
  std::vector<std::string> lines = results[0]["images"];
  ASSERT_EQ(lines.size(), 5u) << results[0].dump();
  EXPECT_EQ(lines[0].rfind("[image/png left out: not valid base64", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1], "[image/png saved as chart-1.png; its header gives no believable size]");
  EXPECT_EQ(lines[2], "[image/png left out: not a PNG (no PNG signature)]");
  EXPECT_EQ(lines[3], "[image/png left out: a PNG cut short before its header ends]");
  EXPECT_EQ(lines[4].rfind("[image/jpeg left out: not valid base64", 0), 0u) << lines[4];
  // Only the one believable-enough file was written.
  std::vector<std::string> written;
  for (const auto& e : fs::directory_iterator(t->image_dir)) {
    written.push_back(e.path().filename().string());
  }
  EXPECT_EQ(written, std::vector<std::string>{"chart-1.png"});
  if (!InBox()) fs::remove_all(t->image_dir);
  json images = json::parse(t->ToJson())["steps"][0]["images"];
  ASSERT_EQ(images.size(), 5u);
  EXPECT_EQ(images[0]["path"], nullptr);
  EXPECT_EQ(images[1]["width"], nullptr);
  EXPECT_FALSE(images[0]["note"].get<std::string>().empty());
}

// A cell past its timeout is interrupted and the session survives; one that ignores the
// interrupt costs the kernel, and the model is told so in both cases.
TEST_P(InterpreterTest, TimeoutKeepsStateAndAKernelRestartIsReported) {
  if (!InBox()) GTEST_SKIP() << "host_kernel.py has no timeouts; needs a box's kernel";
  InterpreterOptions o = Options("timeout_and_restart.json");
  o.box.exec_timeout = std::chrono::seconds(2);
  Interpreter interpreter(o);
  auto t = interpreter.Ask("time out");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto results = ToolResultsSent();
  ASSERT_EQ(results.size(), 5u);
  EXPECT_EQ(results[1]["timed_out"], true) << results[1].dump();
  EXPECT_EQ(results[1]["kernel_restarted"], false);
  EXPECT_EQ(results[1]["error"]["name"], "KeyboardInterrupt");
  EXPECT_EQ(results[2]["result"], "42") << results[2].dump();  // x survived the interrupt
  EXPECT_EQ(results[3]["timed_out"], true) << results[3].dump();
  EXPECT_EQ(results[3]["kernel_restarted"], true);
  EXPECT_NE(results[3]["error"]["value"].get<std::string>().find("kernel restarted: state lost"),
            std::string::npos);
  EXPECT_EQ(results[4]["result"], "False") << results[4].dump();  // a fresh session
}

// The whole flow with the real libraries: a DataFrame made in step 1 is plotted in step 2 and
// the matplotlib figure comes back as a PNG.
TEST_P(InterpreterTest, PandasChartFromTheDataImage) {
  if (!InBox()) GTEST_SKIP() << "needs the python-data image in a box";
  if (!DataImageAvailability().ok()) {
    GTEST_SKIP() << "no python-data box here (codebox image build python-data): "
                 << DataImageAvailability().ToString();
  }
  ScratchDir scratch("codebox_llm_pandas");
  InterpreterOptions o = Options("pandas_chart.json");
  o.box.image = "python-data";
  o.box.memory_mib = 1024;
  o.output_dir = (scratch.path() / "out").string();
  Interpreter interpreter(o);
  auto t = interpreter.Ask("plot y against x");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto results = ToolResultsSent();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0]["error"], nullptr) << results[0].dump();
  EXPECT_NE(results[0]["result"].get<std::string>().find("mean"), std::string::npos);
  EXPECT_EQ(results[1]["error"], nullptr) << results[1].dump();
  EXPECT_EQ(results[1]["stdout"], "81\n");
  ASSERT_EQ(t->steps[1].images.size(), 1u);
  const cell_images::SavedImage& chart = t->steps[1].images[0];
  ASSERT_TRUE(chart.saved()) << chart.note;
  ASSERT_TRUE(chart.size);
  EXPECT_GT(chart.size->width, 100u);
  EXPECT_GT(chart.size->height, 100u);
  EXPECT_EQ(results[1]["images"][0], chart.Summary());
  EXPECT_EQ(Slurp(chart.path).size(), chart.bytes);
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
  const std::string printed = JoinChunks(t->steps[0].result->stdout_chunks);
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
