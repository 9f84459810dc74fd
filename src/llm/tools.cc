#include "llm/tools.h"

#include <nlohmann/json.hpp>

#include "base/json.h"

namespace codebox::llm {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// A call's code is far below this; a text beyond it is not read.
constexpr base::JsonLimits kModelJsonLimits{64, 8u << 20};

// Small models write code with raw line breaks inside JSON strings, which JSON forbids; such a
// text is read with those characters escaped.
std::string EscapeControlCharsInStrings(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  base::JsonStringScanner strings;
  for (char c : text) {
    const bool in_string = strings.InString(c);
    if (in_string && c == '\n')
      out += "\\n";
    else if (in_string && c == '\r')
      out += "\\r";
    else if (in_string && c == '\t')
      out += "\\t";
    else
      out.push_back(c);
  }
  return out;
}

constexpr char kArgumentsShape[] =
    R"x(the arguments must be a JSON object like {"code": "print(1 + 1)"})x";

}  // namespace

ToolSpec RunPythonToolSpec() {
  return {
      kRunPythonTool,
      "Run Python 3 code as a cell of a Jupyter-like session (IPython) in an isolated sandbox "
      "(no network). Variables, imports and functions persist from call to call, as do files "
      "in the working directory /work; input files are under /data. You get back stdout, "
      "stderr, the value of the last expression (result), and the error with its traceback "
      "when the cell raised. Charts: matplotlib and plt.show(); each figure is saved as an "
      "image the user sees, and you get one line naming the file.",
      R"({"type":"object","properties":{"code":{"type":"string","description":"The Python 3 code of the cell to run."}},"required":["code"]})"};
}

json ParseModelJson(std::string_view text) {
  json j = base::ParseJsonOrDiscarded(text, kModelJsonLimits);
  if (!j.is_discarded()) return j;
  return base::ParseJsonOrDiscarded(EscapeControlCharsInStrings(text), kModelJsonLimits);
}

StatusOr<std::string> ParseRunPythonArguments(std::string_view arguments) {
  json j = ParseModelJson(arguments);
  if (j.is_discarded()) {
    std::string quoted(arguments.substr(0, 200));
    return InvalidArgument("the arguments of run_python are not valid JSON (" + quoted +
                           (arguments.size() > 200 ? "..." : "") + "); " + kArgumentsShape +
                           ", with the code escaped as a JSON string. Nothing was run.");
  }
  if (!j.is_object()) {
    return InvalidArgument(std::string("the arguments of run_python are not a JSON object; ") +
                           kArgumentsShape + ". Nothing was run.");
  }
  auto code = j.find("code");
  if (code == j.end() || !code->is_string()) {
    return InvalidArgument(std::string("run_python needs a string field \"code\"; ") +
                           kArgumentsShape + ". Nothing was run.");
  }
  std::string text = code->get<std::string>();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return InvalidArgument("the \"code\" of run_python is empty. Nothing was run.");
  }
  return text;
}

std::string CapText(std::string_view s, size_t limit) {
  if (s.size() <= limit) return std::string(s);
  // The head shows how it started, the tail holds the traceback or the final result.
  size_t head = limit / 2;
  size_t tail = limit - head;
  std::string marker =
      "\n[... " + std::to_string(s.size() - head - tail) + " bytes left out ...]\n";
  return std::string(s.substr(0, head)) + marker + std::string(s.substr(s.size() - tail));
}

std::string JoinChunks(const std::vector<std::string>& chunks) {
  std::string text;
  for (const std::string& c : chunks) text += c;
  return text;
}

std::string ToolResultJson(const Execution& cell, const std::vector<std::string>& image_lines,
                           size_t cap_bytes) {
  bool capped = false;
  auto cap = [&](std::string_view text) {
    capped = capped || text.size() > cap_bytes;
    return CapText(text, cap_bytes);
  };
  json j = {{"stdout", cap(JoinChunks(cell.stdout_chunks))},
            {"stderr", cap(JoinChunks(cell.stderr_chunks))},
            {"result", nullptr},
            {"error", nullptr}};
  json outputs = json::array();
  size_t outputs_bytes = 0;
  size_t outputs_left_out = 0;
  for (const CellResult& r : cell.results) {
    const std::string* text = r.Get("text/plain");
    if (r.is_main_result) {
      if (text != nullptr) j["result"] = cap(*text);
      continue;
    }
    // An image's text/plain ("<Figure size 640x480 with 1 Axes>") says less than its line.
    if (text == nullptr || r.Get("image/png") || r.Get("image/jpeg") || r.Get("image/svg+xml")) {
      continue;
    }
    if (outputs_bytes >= cap_bytes) {
      ++outputs_left_out;
      continue;
    }
    outputs.push_back(CapText(*text, cap_bytes - outputs_bytes));
    outputs_bytes += outputs.back().get<std::string>().size();
  }
  if (outputs_left_out > 0) {
    capped = true;
    outputs.push_back("[... " + std::to_string(outputs_left_out) + " more outputs left out ...]");
  }
  if (!outputs.empty()) j["outputs"] = std::move(outputs);
  if (!image_lines.empty()) j["images"] = image_lines;
  if (cell.error) {
    j["error"] = {{"name", cap(cell.error->name)},
                  {"value", cap(cell.error->value)},
                  {"traceback", cap(cell.error->traceback)}};
  }
  j["timed_out"] = cell.timed_out;
  j["kernel_restarted"] = cell.kernel_restarted;
  j["output_truncated"] = cell.output_truncated || capped;
  if (cell.out_of_memory) j["out_of_memory"] = true;
  // Why a connection failed, and what to do, so the model stops retrying a host it will
  // never reach. At most a few: each is a few lines of the box's text.
  if (!cell.network_events.empty()) {
    json events = json::array();
    for (size_t i = 0; i < cell.network_events.size() && i < 5; ++i) {
      const NetworkEvent& e = cell.network_events[i];
      events.push_back({{"host", cap(e.host)},
                        {"port", e.port},
                        {"rule", e.rule},
                        {"message", cap(e.message)},
                        {"hint", e.hint}});
    }
    j["network_events"] = std::move(events);
  }
  return Dump(j);
}

std::string ToolErrorJson(std::string_view message) {
  return Dump(json{{"error", std::string(message)}});
}

}  // namespace codebox::llm
