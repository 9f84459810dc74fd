#include "llm/session.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <filesystem>
#include <system_error>

#include "base/log.h"
#include "llm/tools.h"

namespace codebox::llm {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::chrono::milliseconds Since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

ClientOptions MakeClientOptions(const InterpreterOptions& o) {
  ClientOptions c;
  c.base_url = o.base_url;
  c.api_key = o.api_key;
  c.model = o.model;
  c = ClientOptionsFromEnvironment(std::move(c));
  c.stream = o.stream;
  c.request_timeout = o.request_timeout;
  c.max_retries = o.max_retries;
  c.initial_backoff = o.initial_backoff;
  c.on_notice = o.on_notice;
  return c;
}

// The name a file gets in the box: its last path component ("dir/" counts as "dir").
std::string BoxName(const std::string& host_path) {
  fs::path p = fs::path(host_path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

// A name the box listed: it comes from untrusted code, so it must be one plain component.
bool SafeName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

cell_images::ImageSaverOptions MakeImageOptions(const InterpreterOptions& o) {
  cell_images::ImageSaverOptions images;
  images.dir = o.output_dir;
  images.temp_prefix = "codebox-ask-";
  return images;
}

}  // namespace

Session::Session(const InterpreterOptions& options, Transcript& transcript)
    : options_(options),
      transcript_(transcript),
      client_(MakeClientOptions(options)),
      images_(MakeImageOptions(options)) {
  transcript_.model = client_.options().model;
  transcript_.base_url = client_.options().base_url;
}

void Session::Notice(std::string_view text) const {
  if (options_.on_notice) options_.on_notice(text);
}

Status Session::Open() {
  for (const std::string& f : options_.input_files) {
    std::error_code ec;
    if (!fs::exists(f, ec)) return NotFound("input file " + f + " does not exist");
  }
  RunnerFactory factory = options_.runner_factory ? options_.runner_factory : OpenBoxRunner;
  auto runner = factory(options_.box);
  if (!runner.ok()) return runner.status().WithContext("create box");
  runner_ = std::move(*runner);
  transcript_.driver = runner_->driver();
  if (options_.input_files.empty()) return Status::Ok();
  // Every driver keeps /data writable for inputs; copying creates it.
  const std::string input_dir = "/data";
  for (const std::string& f : options_.input_files) {
    std::string box_path = input_dir + "/" + BoxName(f);
    RETURN_IF_ERROR(runner_->CopyIn(f, box_path).WithContext("copy " + f + " into the box"));
    box_inputs_.push_back(box_path);
  }
  return Status::Ok();
}

namespace {

// File data under a host path that a copy-out wrote (it makes no symlinks to follow).
uint64_t BytesUnder(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(fs::symlink_status(path, ec))) return fs::file_size(path, ec);
  uint64_t total = 0;
  for (auto it = fs::recursive_directory_iterator(path, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

}  // namespace

Status Session::CopyOutputs() {
  if (options_.output_dir.empty() || !runner_) return Status::Ok();
  const std::string& workdir = options_.box.workdir;
  ASSIGN_OR_RETURN(ExecResult ls, runner_->Exec({"find", workdir, "-mindepth", "1", "-maxdepth",
                                                 "1", "-printf", "%f\\0"}));
  if (!ls.ok()) return IoError("list " + workdir + " in the box: " + ls.stderr_data);
  std::error_code ec;
  fs::create_directories(options_.output_dir, ec);
  if (ec) return IoError("create " + options_.output_dir + ": " + ec.message());
  // One budget for every entry together (the box's disk size): copied one by one, hard links
  // to one big file could otherwise each take a whole copy-out limit on the host.
  uint64_t budget = options_.box.disk_mib << 20;
  size_t start = 0;
  while (start < ls.stdout_data.size()) {
    size_t end = ls.stdout_data.find('\0', start);
    if (end == std::string::npos) end = ls.stdout_data.size();
    std::string name = ls.stdout_data.substr(start, end - start);
    start = end + 1;
    if (!SafeName(name)) continue;
    if (images_.Wrote(name)) {
      // The host named that file for an image; a file of the box does not replace it.
      Notice("not copied: " + workdir + "/" + name + " (an image was saved under that name)");
      continue;
    }
    std::string host_path = (fs::path(options_.output_dir) / name).string();
    if (budget == 0) return LimitExceeded("the box's outputs are over the copy-out limit");
    CopyOutOptions copy;
    copy.max_bytes = budget;
    RETURN_IF_ERROR(runner_->CopyOut(workdir + "/" + name, host_path, copy)
                        .WithContext("copy " + name + " out of the box"));
    budget -= std::min(budget, BytesUnder(host_path));
    transcript_.files_out.push_back(host_path);
    Notice("wrote " + host_path);
  }
  return Status::Ok();
}

Step& Session::NewStep(std::string kind) {
  Step step;
  step.index = static_cast<int>(transcript_.steps.size()) + 1;
  step.kind = std::move(kind);
  transcript_.steps.push_back(std::move(step));
  return transcript_.steps.back();
}

std::string Session::NewCallId() {
  // Nine letters and digits: vLLM's Mistral templates refuse any other id.
  char id[16];
  std::snprintf(id, sizeof id, "call%05d", next_call_id_++ % 100000);
  return id;
}

StatusOr<TurnReply> Session::Turn(Step& step, bool with_tools, bool stream_text) {
  std::vector<ToolSpec> tools;
  if (with_tools) tools.push_back(RunPythonToolSpec());
  // The step this turn becomes is made only once its reply is known: it is the next one.
  if (options_.on_turn) {
    options_.on_turn(static_cast<int>(transcript_.steps.size()) + 1, client_.options().model);
  }
  ReplyTextStream stream(stream_text ? options_.on_text : nullptr, options_.on_thinking);
  auto result = client_.Complete(
      transcript_.messages, tools, [&](std::string_view text) { stream.AddContent(text); },
      [&](std::string_view text) { stream.AddReasoning(text); });
  if (!result.ok()) return result.status();
  stream.Finish();
  step.model_latency = result->latency;
  TurnReply reply;
  reply.turn = ReadModelReply(result->reply.message);
  reply.finish_reason = result->reply.finish_reason;
  reply.shown = stream.shown();
  step.thinking = reply.turn.thinking;
  // A server that did not stream its thinking (or its whole reply) shows it now.
  if (!stream.showed_thinking() && !reply.turn.thinking.empty() && options_.on_thinking) {
    options_.on_thinking(reply.turn.thinking);
  }
  // Tool results must name their call, each its own; some servers leave the id out, or
  // repeat one.
  std::set<std::string> ids;
  for (ToolCall& call : reply.turn.calls) {
    if (call.id.empty() || !ids.insert(call.id).second) call.id = NewCallId();
    ids.insert(call.id);
  }
  // What the model wrote goes back as the server expects it: calls as tool_calls whatever
  // shape they came in, so that its template writes them in the model's own format. A call
  // that could not be read stays in the text, where the model can see what it wrote.
  Message message{"assistant", reply.turn.unreadable.empty() ? reply.turn.text : reply.turn.content,
                  reply.turn.calls, {}};
  transcript_.messages.push_back(std::move(message));
  return reply;
}

void Session::ShowAnswer(const TurnReply& reply) const {
  if (!options_.on_text) return;
  std::string rest = UnshownAnswer(reply.turn.text, reply.shown);
  if (!rest.empty()) options_.on_text(rest);
}

void Session::NoAnswer(const TurnReply& reply, Step& step) {
  step.kind = "answer";
  step.error = "the model's reply held " + DescribeEmptyReply(reply.turn, reply.finish_reason);
  transcript_.answer.clear();
  transcript_.stop_reason = "no_answer";
  transcript_.stop_detail = step.error;
}

StatusOr<Execution> Session::RunCode(Step& step, const std::string& code) {
  step.code = code;
  if (options_.on_code) options_.on_code(step.index, code);
  auto start = Clock::now();
  auto result = runner_->RunCode(code);
  step.box_latency = Since(start);
  if (!result.ok()) {
    step.error = result.status().ToString();
    return result.status().WithContext("run code in the box");
  }
  const bool had_dir = !transcript_.image_dir.empty();
  step.images = images_.Save(result->results);
  step.result = std::move(*result);
  for (const cell_images::SavedImage& image : step.images) {
    if (image.saved()) transcript_.image_dir = images_.dir();
  }
  if (!had_dir && !transcript_.image_dir.empty() && options_.output_dir.empty()) {
    Notice("images are saved in " + transcript_.image_dir + " (--out DIR to choose)");
  }
  if (options_.on_result) options_.on_result(step);
  return *step.result;
}

std::string Session::FilesNote() const {
  std::string note;
  if (!box_inputs_.empty()) {
    note += " The user's input files are in the sandbox at:";
    for (const std::string& p : box_inputs_) note += " " + p;
    note += ".";
  }
  if (!options_.output_dir.empty()) {
    note += " Other files the user should get (tables, data) go in " + options_.box.workdir +
            ": they are copied out at the end.";
  }
  return note;
}

namespace {

// What both modes tell the model about the session.
constexpr char kSessionNote[] =
    " The value of the last expression of a cell is shown, as in Jupyter. For charts use "
    "matplotlib and call plt.show(): each figure comes back as an image that the user sees "
    "(you get a line naming the saved file, not the picture).";

}  // namespace

std::string NetworkNote(const BoxOptions& box) {
  const NetworkMode mode = EffectiveNetwork(box);
  if (mode == NetworkMode::kNone) return " without network access";
  const std::string how =
      " through an HTTP proxy already set in its environment (HTTP_PROXY, HTTPS_PROXY; "
      "urllib, requests, curl and pip use it; DNS does not resolve in the sandbox)";
  if (mode == NetworkMode::kOpen) {
    return " that reaches public internet addresses" + how +
           ". Packages missing from the image can be installed in a cell with "
           "`%pip install --user NAME`";
  }
  std::string hosts;
  bool index = false;
  for (const std::string& h : box.allow_hosts) {
    hosts += (hosts.empty() ? "" : ", ") + h;
    index = index || h == "pypi.org" || h == "pypi.org:443";
  }
  if (hosts.empty()) return " without network access";
  return " that reaches only these hosts" + how + ": " + hosts + "; every other host is refused" +
         (index ? ". Packages missing from the image can be installed in a cell with "
                  "`%pip install --user NAME`"
                : "");
}

std::string ToolsSystemPrompt(const Session& s) {
  if (!s.options().system_prompt.empty()) return s.options().system_prompt;
  return "You solve the user's task by writing Python 3 and running it with the run_python "
         "tool, in an isolated sandbox" +
         NetworkNote(s.options().box) +
         ". Compute rather than guess. Each "
         "call runs a cell of one Python session, like a Jupyter notebook: variables, imports "
         "and functions persist between calls, and so do files in " +
         s.options().box.workdir + "." + kSessionNote + s.FilesNote() +
         " If a cell fails, read the error and its traceback, fix the code and run it again. "
         "When you have the result, reply with a short final answer in plain text, without "
         "calling the tool.";
}

std::string OneShotSystemPrompt(const Session& s) {
  if (!s.options().system_prompt.empty()) return s.options().system_prompt;
  return "You solve the user's task by writing one complete Python 3 program. Reply with "
         "exactly one ```python fenced code block. The program runs as a cell of a Python "
         "session (IPython) in an isolated sandbox" +
         NetworkNote(s.options().box) +
         "; it must print the "
         "answer to stdout." +
         std::string(kSessionNote) + s.FilesNote();
}

}  // namespace codebox::llm
