#include "cli/run_json.h"

#include <iostream>
#include <string>

#include "base/text.h"

namespace codebox::cli {

nlohmann::json JsonOutcome(int version, int exit_status, const Status& error) {
  nlohmann::json j = nlohmann::json::object();
  j["version"] = version;
  j["exit_code"] = exit_status;
  j["error"] = nullptr;
  if (!error.ok()) j["error"] = {{"message", base::TerminalSafe(error.message())}};
  return j;
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
