// The interpreter loop: a task in natural language -> the model writes Python -> one box
// runs it as a cell of its code-interpreter session -> the result goes back to the model
// (which may repair and run again) -> answer. The images a cell returns (charts) are saved
// on the host and the model is told their names.
//
//   codebox::llm::InterpreterOptions o;
//   o.on_text = [](std::string_view t) { std::fwrite(t.data(), 1, t.size(), stdout); };
//   codebox::llm::Interpreter interpreter(o);
//   auto transcript = interpreter.Ask("What is the 20th Fibonacci number?");
//
// One box per Ask, created before the first model turn and destroyed when Ask returns. Every
// step runs as a cell of that box's one session, so variables and files persist between the
// steps of one conversation and nothing persists after it. The API key and the host
// environment never enter the box: it gets BoxOptions::env only.
//
// Thread safety: one Ask at a time per Interpreter; separate Interpreters are independent.
// Callbacks run on the thread that called Ask.
#ifndef CODEBOX_LLM_INTERPRETER_H_
#define CODEBOX_LLM_INTERPRETER_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cell_images/image_files.h"
#include "codebox/execution.h"
#include "codebox/options.h"
#include "codebox/status.h"
#include "llm/chat.h"
#include "llm/runner.h"

namespace codebox::llm {

enum class Mode {
  kTools,    // the model calls a run_python tool, as often as it needs (up to max_steps)
  kOneShot,  // the model replies with a ```python block; it runs as a cell, one repair turn
  kAuto,     // tools; oneshot when the server rejects tools or the model answers with a block
};
std::string_view ModeName(Mode mode);
StatusOr<Mode> ParseMode(std::string_view name);

struct Step;

struct InterpreterOptions {
  // Empty: OPENAI_BASE_URL / OPENAI_API_KEY / CODEBOX_MODEL, then the OpenAI API, no key,
  // gpt-4o-mini.
  std::string base_url;
  std::string api_key;
  std::string model;
  Mode mode = Mode::kAuto;
  int max_steps = 8;                 // model turns in tools mode
  size_t tool_output_cap = 8 << 10;  // bytes of each text (stdout, stderr, ...) sent back per cell
  bool stream = true;
  std::chrono::milliseconds request_timeout{120'000};
  int max_retries = 4;
  std::chrono::milliseconds initial_backoff{1'000};
  std::string system_prompt;  // empty: the built-in one for the mode

  BoxOptions box;
  // Host paths, copied to /data/<basename>; the model is told where they are.
  std::vector<std::string> input_files;
  // Where the images cells return are saved (chart-1.png, ...), and, when set, where what
  // the code left in the box workdir is copied at the end. Empty: images go to a fresh
  // temporary directory, named in a notice when the first image is saved.
  std::string output_dir;

  // Progress, all optional. on_text gets the model's text as it streams (in oneshot mode,
  // where the reply is code, it gets what the program printed instead).
  std::function<void(std::string_view)> on_text;
  // A model turn starts: the request goes to `model`; its reply becomes step `step` (a CLI
  // shows that it waits for it).
  std::function<void(int step, std::string_view model)> on_turn;
  std::function<void(int step, const std::string& code)> on_code;
  // After a cell ran: the step holds its result and its images (saved or left out).
  std::function<void(const Step& step)> on_result;
  std::function<void(std::string_view)> on_notice;  // retries, fallbacks, copied files
  // The model's thinking (<think> blocks, reasoning_content), as it streams: progress, never
  // the answer, never run.
  std::function<void(std::string_view)> on_thinking;

  // Tests: where code runs. Empty: a codebox::Box made from `box`.
  RunnerFactory runner_factory;
};

// One model turn, and the code it ran if any.
struct Step {
  int index = 0;                    // 1-based
  std::string kind;                 // "tool", "oneshot", "repair", "answer"
  std::string code;                 // empty when the turn ran nothing
  std::optional<Execution> result;  // what the cell gave back
  // The cell's images, in order: saved under output_dir (or the temporary directory), or
  // left out with a note (broken, too big, too many).
  std::vector<cell_images::SavedImage> images;
  std::string error;     // why code could not run (bad tool arguments, box failure), or why
                         // the turn held no answer
  std::string thinking;  // what the model thought before this turn's code or answer
  std::chrono::milliseconds model_latency{0};
  std::chrono::milliseconds box_latency{0};
};

struct Transcript {
  std::string task;
  std::string model;
  std::string base_url;
  std::string mode;    // the mode that produced the answer: "tools" or "oneshot"
  std::string driver;  // the isolation that ran the code
  std::vector<Message> messages;
  std::vector<Step> steps;
  std::string answer;
  // "answer": the model answered; "step_limit": max_steps passed without an answer;
  // "code_failed" (oneshot): the program still failed after the repair turn; "no_answer": the
  // model's last reply held neither an answer nor code (or its program printed nothing).
  std::string stop_reason;
  std::string stop_detail;  // for a stop_reason other than "answer": what happened, for people
  std::vector<std::string> files_out;  // host paths copied from the box workdir to output_dir
  std::string image_dir;               // where images were saved; empty when there were none
  std::chrono::milliseconds total_latency{0};

  bool ok() const { return stop_reason == "answer"; }
  // The whole transcript as JSON (never holds the API key, nor the images' data: their
  // files are listed instead).
  std::string ToJson() const;
};

// One step as it appears in Transcript::ToJson's "steps".
std::string StepToJson(const Step& step);

class Interpreter {
 public:
  explicit Interpreter(InterpreterOptions options);

  // Errors are for what stopped the conversation (the model server, the box); a program
  // that fails is a result the model sees. After an error, partial() holds what happened.
  StatusOr<Transcript> Ask(const std::string& task);
  const Transcript& partial() const { return partial_; }

  const InterpreterOptions& options() const { return options_; }

 private:
  InterpreterOptions options_;
  Transcript partial_;
};

}  // namespace codebox::llm

#endif  // CODEBOX_LLM_INTERPRETER_H_
