#include "llm/tools.h"

#include <nlohmann/json.hpp>

namespace codebox::llm {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

constexpr char kArgumentsShape[] = R"x(the arguments must be a JSON object like {"code": "print(1 + 1)"})x";

}  // namespace

ToolSpec RunPythonToolSpec() {
  return {
      kRunPythonTool,
      "Run a Python 3 program in an isolated sandbox (no network) and get back its stdout, "
      "stderr and exit code. Print what you need to see. Each call is a fresh process: "
      "variables do not survive between calls, files in the working directory /work do. "
      "Input files are under /data.",
      R"({"type":"object","properties":{"code":{"type":"string","description":"The complete Python 3 program to run."}},"required":["code"]})"};
}

StatusOr<std::string> ParseRunPythonArguments(std::string_view arguments) {
  json j = json::parse(arguments, nullptr, /*allow_exceptions=*/false);
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
  std::string marker = "\n[... " + std::to_string(s.size() - head - tail) + " bytes left out ...]\n";
  return std::string(s.substr(0, head)) + marker + std::string(s.substr(s.size() - tail));
}

std::string ToolResultJson(const ExecResult& r, size_t cap_bytes) {
  json j = {{"stdout", CapText(r.stdout_data, cap_bytes)},
            {"stderr", CapText(r.stderr_data, cap_bytes)},
            {"exit_code", r.exit_code},
            {"timed_out", r.timed_out},
            {"output_truncated", r.output_truncated || r.stdout_data.size() > cap_bytes ||
                                     r.stderr_data.size() > cap_bytes}};
  if (r.out_of_memory) j["out_of_memory"] = true;
  if (r.signal != 0) j["signal"] = r.signal;
  return Dump(j);
}

std::string ToolErrorJson(std::string_view message) {
  return Dump(json{{"error", std::string(message)}});
}

}  // namespace codebox::llm
