// `codebox ask`: a task in natural language -> a model writes Python -> a box runs it ->
// the answer. The answer streams to stdout; progress (code, results, retries) goes to
// stderr so that stdout stays the answer alone (or the JSON transcript with --json).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>

#include "base/text.h"
#include "cli/box_flags.h"
#include "cli/run_json.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "llm/interpreter.h"
#include "llm/tools.h"
#include "remote/server_choice.h"

namespace codebox::cli {
namespace {

constexpr const char kAskHelp[] = R"(usage: codebox ask [options] TASK...   (or - to read the task from stdin)

A model writes Python for TASK, a fresh box runs it as cells of one session
(variables persist from step to step), the model reads the results (and repairs
its code when it failed) and answers. Charts a cell shows are saved as images.
One box serves the whole conversation; the API key and this host's environment
never enter it.

model options:
  --model M              model id (default $CODEBOX_MODEL, else gpt-4o-mini)
  --base-url URL         OpenAI-compatible endpoint (default $OPENAI_BASE_URL,
                         else https://api.openai.com/v1; e.g.
                         http://127.0.0.1:8080/v1 for llama-server,
                         http://127.0.0.1:11434/v1 for Ollama). The key comes
                         from $OPENAI_API_KEY.
  --mode M               tools (the model calls run_python), oneshot (it
                         replies with a ```python block), auto (default: tools,
                         oneshot if not supported)
  --max-steps N          model turns before giving up (default 8)
  --request-timeout T    longest silence from the model server (default 120s)
  --no-stream            ask for whole replies instead of server-sent events

input and output:
  --file PATH            copy PATH into the box as /data/NAME; the model is
                         told (repeatable)
  --out DIR              save the images cells return in DIR (chart-1.png, ...;
                         default: a new temporary directory, printed), and copy
                         what the code left in the box workdir to DIR
                         afterwards
  --show-code            print each program before it runs (to stderr)
  --json                 print the whole transcript as JSON instead of the
                         answer
  --local                run the box in this process even when a codebox server
                         is set or answers

exit status: 0 answered; 1 no answer (step limit, the program still failed,
or the model's reply held no answer and no code: the message says what came
back); 2 usage; 125 the model server or the box failed (the message says
which and why).

)";

struct AskFlags {
  llm::InterpreterOptions options;
  std::string task;
  bool show_code = false;
  bool json = false;
  bool local = false;  // --local: never through a codebox server
};

StatusOr<int> ParseInt(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || v < 1 || v > 1000) {
    return InvalidArgument(flag + ": '" + value + "' is not a number from 1 to 1000");
  }
  return static_cast<int>(v);
}

// Returns nullopt after printing help.
StatusOr<std::optional<AskFlags>> ParseFlags(const std::vector<std::string>& args) {
  AskFlags f;
  std::vector<std::string> words;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kAskHelp, stdout);
      std::fputs(BoxFlagsHelp().c_str(), stdout);
      return std::optional<AskFlags>();
    }
    ASSIGN_OR_RETURN(bool box_flag, ParseBoxFlag(args, &i, &f.options.box));
    if (box_flag) continue;
    if (a == "--show-code") {
      f.show_code = true;
    } else if (a == "--local") {
      f.local = true;
    } else if (a == "--json") {
      f.json = true;
    } else if (a == "--no-stream") {
      f.options.stream = false;
    } else if (a == "--") {
      words.insert(words.end(), args.begin() + i + 1, args.end());
      break;
    } else if (a.size() > 1 && a[0] == '-') {
      static const char* const kValued[] = {"--model", "--base-url", "--mode", "--max-steps",
                                            "--request-timeout", "--file", "--out"};
      bool known = false;
      for (const char* name : kValued) known = known || a == name;
      if (!known) {
        return InvalidArgument("unknown option " + a + BoxFlagHint(a) +
                               " (see codebox ask --help)");
      }
      if (i + 1 >= args.size()) return InvalidArgument(a + " needs a value");
      const std::string& v = args[++i];
      if (a == "--model") f.options.model = v;
      if (a == "--base-url") f.options.base_url = v;
      if (a == "--file") {
        // A usage error here, before a box is made for nothing.
        std::error_code ec;
        if (!std::filesystem::exists(v, ec)) {
          return InvalidArgument("--file " + v + ": no such file or directory");
        }
        f.options.input_files.push_back(v);
      }
      if (a == "--out") f.options.output_dir = v;
      if (a == "--mode") {
        ASSIGN_OR_RETURN(f.options.mode, llm::ParseMode(v));
      } else if (a == "--max-steps") {
        ASSIGN_OR_RETURN(f.options.max_steps, ParseInt(a, v));
      } else if (a == "--request-timeout") {
        ASSIGN_OR_RETURN(f.options.request_timeout, ParseDuration(v));
      }
    } else {
      words.push_back(a);
    }
  }
  if (words.size() == 1 && words[0] == "-") {
    f.task.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    for (const std::string& w : words) f.task += (f.task.empty() ? "" : " ") + w;
  }
  if (f.task.find_first_not_of(" \t\r\n") == std::string::npos) {
    return InvalidArgument("no task given (codebox ask TASK, or - to read it from stdin)");
  }
  return std::optional<AskFlags>(std::move(f));
}

// The last lines of a traceback: where it says what went wrong.
std::string Tail(const std::string& text, int lines) {
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  while (lines-- > 0 && pos != std::string::npos && pos > 0) pos = text.rfind('\n', pos - 1);
  return pos == std::string::npos || pos == 0 ? text : text.substr(pos + 1);
}

// Progress lines to stderr. The answer owns stdout, so a progress line starts on a fresh line
// of the terminal when the answer text was cut mid-line. On a terminal, a status line with a
// spinner says what the model is doing while people wait for it, and the answer is labeled.
class Progress {
 public:
  Progress(bool show_code, BoxStartNotice* box_start)
      : show_code_(show_code), box_start_(box_start) {}

  // A model turn starts: the box is up by now (it is made before the first turn).
  void Turn(int step, std::string_view model) {
    box_start_->Done();
    EndThinking();
    Break();
    step_ = step;
    thought_bytes_ = 0;
    text_in_turn_ = false;
    waiting_for_ = "[step " + std::to_string(step) + "] asking " +
                   base::TerminalSafe(std::string(model), 80) + "...";
    status_.Show(waiting_for_);
  }
  // The model's thinking: progress, never the answer. On a terminal the status line says how
  // much has come; with --show-code the thoughts themselves go to stderr.
  void Thinking(std::string_view text) {
    if (text.empty()) return;
    thought_bytes_ += text.size();
    if (show_code_) {
      status_.Clear();
      if (!thinking_open_) std::fprintf(stderr, "--- step %d: thinking ---\n", step_);
      thinking_open_ = true;
      std::string safe = base::TerminalSafe(std::string(text), text.size() + 16);
      std::fputs(safe.c_str(), stderr);
      thinking_ends_line_ = !safe.empty() && safe.back() == '\n';
      std::fflush(stderr);
    }
    if (!show_code_ && !waiting_for_.empty()) {  // the thoughts themselves are the progress
      status_.Show("[step " + std::to_string(step_) + "] thinking (" +
                   std::to_string(thought_bytes_) + " bytes)...");
    }
  }
  void Text(std::string_view text) {
    if (text.empty()) return;
    StopWaiting();
    if (!text_in_turn_ && label_answer_) {
      std::fputs("answer:\n", stderr);
      std::fflush(stderr);
    }
    text_in_turn_ = true;
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    at_line_start_ = text.back() == '\n';
  }
  void Code(int step, const std::string& code) {
    StopWaiting();
    Break();
    if (show_code_) {
      std::fprintf(stderr, "--- step %d: code ---\n%s%s---\n", step, code.c_str(),
                   (!code.empty() && code.back() == '\n') ? "" : "\n");
    } else {
      std::fprintf(stderr, "[step %d] running Python...\n", step);
    }
  }
  void Result(const llm::Step& step) {
    StopWaiting();
    const Execution& e = *step.result;
    std::string what = e.kernel_restarted ? std::string(e.timed_out ? "timed out, " : "") +
                                                (e.out_of_memory ? "out of memory, " : "") +
                                                "kernel restarted (state lost)"
                       : e.timed_out ? "timed out"
                       : e.error     ? "raised " + e.error->name
                                     : "ok";
    std::string images;
    for (const cell_images::SavedImage& image : step.images) {
      images += image.saved() ? ", saved " + image.path : ", " + image.Summary();
    }
    std::fprintf(stderr, "[step %d] %s in %lld ms (%s)%s%s\n", step.index,
                 base::TerminalSafe(what, 200).c_str(), static_cast<long long>(e.duration.count()),
                 e.driver.c_str(), e.output_truncated ? ", output truncated" : "",
                 base::TerminalSafe(images, 4096).c_str());
    if (show_code_) {
      std::string out = llm::JoinChunks(e.stdout_chunks);
      if (!e.text().empty()) out += (out.empty() || out.back() == '\n' ? "" : "\n") + e.text();
      if (!out.empty()) Block(Tail(out, 10));
    }
    if (e.error) {
      const std::string& tb = e.error->traceback.empty() ? e.error->value : e.error->traceback;
      Block(Tail(tb, 6));
    }
  }
  // Retries and fallbacks come while the model is still awaited: the status line comes back.
  void Notice(std::string_view text) {
    status_.Clear();
    EndThinking();
    Break();
    std::fprintf(stderr, "[codebox] %.*s\n", static_cast<int>(text.size()), text.data());
    if (!waiting_for_.empty()) status_.Show(waiting_for_);
  }
  void Finish() {
    StopWaiting();
    Break();
  }

 private:
  // Text from the box, made safe for the terminal.
  static void Block(const std::string& raw) {
    std::string text = base::TerminalSafe(raw);
    std::fputs(text.c_str(), stderr);
    if (text.empty() || text.back() != '\n') std::fputc('\n', stderr);
  }
  void StopWaiting() {
    waiting_for_.clear();
    status_.Clear();
    EndThinking();
  }
  void EndThinking() {
    if (!thinking_open_) return;
    std::fputs(thinking_ends_line_ ? "---\n" : "\n---\n", stderr);
    thinking_open_ = false;
  }
  void Break() {
    if (!at_line_start_) {
      std::fputc('\n', stdout);
      std::fflush(stdout);
      at_line_start_ = true;
    }
  }
  bool show_code_;
  BoxStartNotice* box_start_;
  StatusLine status_{stderr, IsStatusTerminal(STDERR_FILENO)};
  // Only where the answer and the progress share a terminal is the label needed to tell them
  // apart.
  const bool label_answer_ = status_.enabled() && ::isatty(STDOUT_FILENO) != 0;
  std::string waiting_for_;    // the status text while a model turn is awaited
  bool text_in_turn_ = false;  // the turn's text began (and was labeled)
  int step_ = 0;               // the step the awaited turn becomes
  size_t thought_bytes_ = 0;   // of the awaited turn's thinking
  bool thinking_open_ = false;  // a --show-code thinking block is being written
  bool thinking_ends_line_ = true;
  bool at_line_start_ = true;
};

}  // namespace

int AskCommand(const std::vector<std::string>& args) {
  auto parsed = ParseFlags(args);
  if (!parsed.ok()) {
    PrintError("ask", parsed.status());
    return kExitUsage;
  }
  if (!parsed->has_value()) return 0;
  AskFlags& f = **parsed;
  if (Status st = ValidateForCli(f.options.box); !st.ok()) {
    PrintError("ask", st);
    return kExitUsage;
  }
  if (Status st = remote::ChooseServer(&f.options.box, f.local); !st.ok()) {
    PrintError("ask", st);
    return kExitCodeboxError;
  }
  BoxStartNotice box_start = AnnounceBoxStart(f.options.box);
  Progress progress(f.show_code, &box_start);
  if (!f.json) {
    f.options.on_turn = [&](int step, std::string_view model) { progress.Turn(step, model); };
    f.options.on_text = [&](std::string_view t) { progress.Text(t); };
    f.options.on_code = [&](int step, const std::string& code) { progress.Code(step, code); };
    f.options.on_result = [&](const llm::Step& step) { progress.Result(step); };
    f.options.on_notice = [&](std::string_view n) { progress.Notice(n); };
    f.options.on_thinking = [&](std::string_view t) { progress.Thinking(t); };
  } else {
    f.options.on_turn = [&](int, std::string_view) { box_start.Done(); };
  }
  llm::Interpreter interpreter(f.options);
  auto transcript = interpreter.Ask(f.task);
  box_start.Done();
  progress.Finish();
  int status = 0;
  Status error;
  if (!transcript.ok()) {
    error = transcript.status();
    status = kExitCodeboxError;
  } else if (!transcript->ok()) {
    status = 1;  // no answer: the model stopped without one, or its program failed
  }
  if (f.json) {  // the transcript, with --json's common fields (docs/cli.md)
    nlohmann::json j = nlohmann::json::parse(
        (transcript.ok() ? *transcript : interpreter.partial()).ToJson(), nullptr, false);
    j.update(JsonOutcome(kAskJsonVersion, status, error));
    PrintJson(j);
  }
  if (!error.ok()) {
    PrintError("ask", error);
  } else if (!transcript->ok()) {
    // Never an exit-0 silence: say what came back instead of an answer.
    std::fprintf(stderr, "codebox ask: %s\n",
                 base::TerminalSafe(transcript->stop_detail.empty() ? "no answer (" + transcript->stop_reason + ")"
                                                                    : transcript->stop_detail,
                                    2000)
                     .c_str());
  }
  return status;
}

}  // namespace codebox::cli
