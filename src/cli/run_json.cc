#include "cli/run_json.h"

#include <iostream>
#include <string>

#include "base/text.h"

namespace codebox::cli {

nlohmann::json JsonOutcome(int exit_status, const Status& error) {
  nlohmann::json j = nlohmann::json::object();
  j["version"] = kJsonVersion;
  j["exit_code"] = exit_status;
  j["error"] = nullptr;
  if (!error.ok()) j["error"] = {{"message", base::TerminalSafe(error.message())}};
  return j;
}

void AddOutputJson(std::string_view name, std::string_view bytes, nlohmann::json* out) {
  const bool text = base::IsValidUtf8(bytes);
  (*out)[std::string(name)] = text ? std::string(bytes) : base::EncodeBase64(bytes);
  (*out)[std::string(name) + "_encoding"] = text ? "utf-8" : "base64";
}

void AddExecJson(const ExecResult& r, nlohmann::json* out) {
  (*out)["program_exit_code"] = r.exit_code;
  (*out)["signal"] = r.signal;
  AddOutputJson("stdout", r.stdout_data, out);
  AddOutputJson("stderr", r.stderr_data, out);
  (*out)["timed_out"] = r.timed_out;
  (*out)["out_of_memory"] = r.out_of_memory;
  (*out)["output_truncated"] = r.output_truncated;
  (*out)["duration_ms"] = r.duration.count();
  (*out)["driver"] = r.driver;
}

void PrintJson(const nlohmann::json& j) {
  // Every string in it is valid UTF-8 (output that is not is base64), so strict is safe; the
  // handler only guards a string from elsewhere (an egress host name) that is not.
  nlohmann::detail::serializer<nlohmann::json> out(
      nlohmann::detail::output_adapter<char>(std::cout), ' ',
      nlohmann::json::error_handler_t::replace);
  out.dump(j, /*pretty_print=*/true, /*ensure_ascii=*/false, /*indent_step=*/2);
  std::cout << '\n' << std::flush;
}

}  // namespace codebox::cli
