// Running the tools in a box, and their results as MCP content (docs/mcp.md, "Tools").
#include "mcp/tools.h"

#include <algorithm>
#include <cmath>

#include "base/text.h"
#include "mcp/content.h"

namespace codebox::mcp {
namespace {

using nlohmann::json;

// A call's timeout for a message: "2.5 s", or the box's default.
std::string Limit(std::optional<std::chrono::milliseconds> timeout) {
  if (!timeout) return "the box's exec timeout";
  char text[32];
  std::snprintf(text, sizeof text, "%g s", timeout->count() / 1000.0);
  return text;
}

// A call the box could not serve at all (box gone, kernel cannot start): the model should
// know, and that reset gives it a fresh box.
ToolResult BoxFailure(std::string_view what, const Status& status) {
  return ErrorResult(std::string(what) + " failed: " + base::TerminalSafe(status.message()) +
                     (status.code() == StatusCode::kInvalidArgument
                          ? std::string()
                          : "\n(if the box is broken, call reset for a fresh one)"));
}

// What a cell's rich results may still add: images by count, texts by bytes (a cell may
// display thousands of small values).
struct ResultBudget {
  uint32_t images = 0;
  uint64_t text_bytes_left = 0;
  bool texts_cut = false;
};

// One rich result of a cell: a checked image, else its text/plain.
void AddCellResult(const CellResult& r, const SessionOptions& options, ResultBudget* budget,
                   ToolResult* result) {
  for (const char* mime : {"image/png", "image/jpeg"}) {
    const std::string* data = r.Get(mime);
    if (data == nullptr) continue;
    if (budget->images >= options.max_images) {
      result->Text("[" + std::string(mime) + " left out: a result holds at most " +
                   std::to_string(options.max_images) + " images]");
      return;
    }
    auto image = CheckedImage(*data, mime, options.max_image_bytes);
    if (image.ok()) {
      ++budget->images;
      result->Image(std::move(*image), mime);
      return;
    }
    result->Text("[" + std::string(mime) + " left out: " + image.status().message() + "]");
    return;
  }
  const std::string* text = r.Get("text/plain");
  if (text == nullptr || budget->texts_cut) return;
  if (budget->text_bytes_left == 0) {
    budget->texts_cut = true;
    result->Text("[more results left out: a result keeps " +
                 base::FormatSize(options.max_text_bytes) + " of result text]");
    return;
  }
  // A block costs its JSON wrapping too, so a flood of tiny values runs out as well.
  constexpr uint64_t kBlockBytes = 32;
  const uint64_t take = std::min<uint64_t>(text->size(), budget->text_bytes_left);
  budget->text_bytes_left -= std::min(budget->text_bytes_left, take + kBlockBytes);
  result->Text(SafeText(*text, take));
}

// The box's refused or failed connections, one line each, so the model can stop retrying.
void AddNetworkEvents(const std::vector<NetworkEvent>& events, ToolResult& result) {
  for (size_t i = 0; i < events.size() && i < 5; ++i) {
    const NetworkEvent& e = events[i];
    result.Text("[network: " + SafeText(e.host, 300) + ":" + std::to_string(e.port) + " " + e.rule +
                ": " + SafeText(e.message, 1000) + "; " + e.hint + "]");
  }
}

ToolResult RunPython(Box& box, const json& args, const SessionOptions& options) {
  RunCodeOptions run;
  run.timeout = ToolTimeout(args, options);
  auto execution = box.RunCode(args["code"].get_ref<const std::string&>(), run);
  if (!execution.ok()) return BoxFailure("run_python", execution.status());
  const Execution& e = *execution;
  ToolResult result;
  if (!e.stdout_chunks.empty()) result.Text(SafeText(e.stdout_chunks, options.max_text_bytes));
  if (!e.stderr_chunks.empty()) {
    result.Text("[stderr]\n" + SafeText(e.stderr_chunks, options.max_text_bytes));
  }
  ResultBudget budget{.text_bytes_left = options.max_text_bytes};
  for (const CellResult& r : e.results) AddCellResult(r, options, &budget, &result);
  if (e.error) {
    const std::string& tb = e.error->traceback;
    result.Text("[error] " + SafeText(e.error->name + ": " + e.error->value, 4096) +
                (tb.empty() ? "" : "\n" + SafeText(tb, options.max_text_bytes)));
  }
  if (e.timed_out) {
    result.Text("[the cell was interrupted at its timeout of " + Limit(run.timeout) + "]");
  }
  if (e.kernel_restarted) result.Text("[the Python session restarted: every variable is gone]");
  if (e.out_of_memory) result.Text("[killed: the box ran out of memory]");
  if (e.output_truncated) result.Text("[output passed the box's limit; the rest was dropped]");
  AddNetworkEvents(e.network_events, result);
  result.is_error = e.error.has_value() || e.timed_out || e.kernel_restarted;
  if (result.content.empty()) result.Text("(no output)");
  return result;
}

ToolResult RunCommand(Box& box, const json& args, const SessionOptions& options,
                      std::shared_ptr<ExecCancel> cancel) {
  std::vector<std::string> argv;
  if (args.contains("cmd")) {
    argv.insert(argv.end(), {"/bin/sh", "-c", args["cmd"].get<std::string>()});
  } else {
    for (const json& a : args["argv"]) argv.push_back(a.get<std::string>());
  }
  ExecOptions exec;
  exec.timeout = ToolTimeout(args, options);
  exec.cancel = std::move(cancel);  // StopTool kills exactly this process tree
  auto run = box.Exec(argv, exec);
  if (!run.ok()) return BoxFailure("run_command", run.status());
  ToolResult result;
  if (!run->stdout_data.empty()) result.Text(SafeText(run->stdout_data, options.max_text_bytes));
  if (!run->stderr_data.empty()) {
    result.Text("[stderr]\n" + SafeText(run->stderr_data, options.max_text_bytes));
  }
  std::string end = run->signal != 0 ? "[killed by signal " + std::to_string(run->signal) + "]"
                                     : "[exit code " + std::to_string(run->exit_code) + "]";
  if (run->timed_out) end = "[timed out: killed at its timeout of " + Limit(exec.timeout) + "]";
  if (run->out_of_memory) end += " [killed: the box ran out of memory]";
  if (run->output_truncated) end += " [output passed the box's limit; the rest was dropped]";
  result.Text(end);
  AddNetworkEvents(run->network_events, result);
  result.is_error = !run->ok();
  return result;
}

ToolResult WriteFile(Box& box, const json& args) {
  const std::string& path = args["path"].get_ref<const std::string&>();
  const std::string& content = args["content"].get_ref<const std::string&>();
  if (Status s = box.WriteFile(path, content); !s.ok()) return BoxFailure("write_file", s);
  ToolResult result;
  result.Text("wrote " + std::to_string(content.size()) + " bytes to " + path);
  return result;
}

ToolResult ReadFile(Box& box, const json& args, const SessionOptions& options) {
  const std::string& path = args["path"].get_ref<const std::string&>();
  auto data = box.ReadFile(path, options.max_read_bytes);
  if (!data.ok()) {
    if (data.status().code() == StatusCode::kLimitExceeded) {
      return ErrorResult(path + " is larger than " + base::FormatSize(options.max_read_bytes) +
                         ", the most read_file reads; read a part of it with run_command "
                         "(head -c, tail -c, sed -n)");
    }
    return BoxFailure("read_file", data.status());
  }
  ToolResult result;
  if (std::string type = ImageType(*data);
      !type.empty() && data->size() <= options.max_image_bytes) {
    result.Text(path + ": " + type + ", " + std::to_string(data->size()) + " bytes");
    result.Image(base::EncodeBase64(*data), type);
  } else if (IsUtf8(*data) && data->find('\0') == std::string::npos) {
    result.Text(data->empty() ? "(" + path + " is empty)"
                              : SafeText(*data, options.max_text_bytes));
  } else {
    result.Text(path + " is binary (" + std::to_string(data->size()) +
                " bytes, not UTF-8 text); not shown");
  }
  return result;
}

// A name from the box on one line: newlines and tabs escaped too.
std::string OneLine(const std::string& name) {
  std::string out;
  for (char c : base::TerminalSafe(name, 4096)) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else
      out += c;
  }
  return out;
}

ToolResult ListFiles(Box& box, const json& args, const SessionOptions& options) {
  const std::string path = args.contains("path") ? args["path"].get<std::string>() : ".";
  auto entries = box.ListDir(path);
  if (!entries.ok()) return BoxFailure("list_files", entries.status());
  std::sort(entries->begin(), entries->end(),
            [](const FileEntry& a, const FileEntry& b) { return a.name < b.name; });
  std::string text = OneLine(path == "." ? "the workdir" : path) + ": " +
                     std::to_string(entries->size()) + " entries\n";
  uint32_t shown = 0;
  for (const FileEntry& e : *entries) {
    if (shown++ == options.max_list_entries) {
      text +=
          "[" + std::to_string(entries->size() - options.max_list_entries) + " more not shown]\n";
      break;
    }
    char line[64];
    std::snprintf(line, sizeof line, "%-7s %12s  ", e.type.c_str(),
                  e.type == "dir" ? "-" : std::to_string(e.size).c_str());
    text += line + OneLine(e.name) + (e.type == "dir" ? "/" : "") + "\n";
  }
  ToolResult result;
  result.Text(std::move(text));
  return result;
}

}  // namespace

void ToolResult::Text(std::string text) {
  content.push_back({{"type", "text"}, {"text", std::move(text)}});
}

void ToolResult::Image(std::string base64, std::string mime_type) {
  content.push_back({{"type", "image"}, {"data", std::move(base64)}, {"mimeType", mime_type}});
}

json ToolResult::ToJson() const { return {{"content", content}, {"isError", is_error}}; }

ToolResult ErrorResult(std::string text) {
  ToolResult result;
  result.Text(std::move(text));
  result.is_error = true;
  return result;
}

std::optional<std::chrono::milliseconds> ToolTimeout(const json& arguments,
                                                     const SessionOptions& options) {
  auto it = arguments.find("timeout");
  if (it == arguments.end()) return std::nullopt;
  // Checked > 0 before; compared as a double so that 1e300 is capped, not overflowed.
  const double ms = it->get<double>() * 1000.0;
  if (!(ms < static_cast<double>(options.max_timeout.count()))) return options.max_timeout;
  return std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(std::ceil(ms))));
}

Status StopTool(Box& box, std::string_view tool, ExecCancel& cancel) {
  if (tool == "run_python") return box.InterruptCode();
  cancel.Cancel();  // run_command's exec, however far it got; the other tools end soon
  return Status::Ok();
}

ToolResult RunTool(Box& box, std::string_view tool, const json& arguments,
                   const SessionOptions& options, std::shared_ptr<ExecCancel> cancel) {
  if (tool == "run_python") return RunPython(box, arguments, options);
  if (tool == "run_command") return RunCommand(box, arguments, options, std::move(cancel));
  if (tool == "write_file") return WriteFile(box, arguments);
  if (tool == "read_file") return ReadFile(box, arguments, options);
  if (tool == "list_files") return ListFiles(box, arguments, options);
  return ErrorResult("the tool " + std::string(tool) + " does not run in a box");
}

}  // namespace codebox::mcp
