// A one-shot run's answer as JSON (POST /v1/run, and its `done` event): the exec result and the
// box it ran in. That box, {"driver", "from_pool"}, is also the `box` event of POST /v1/ask.
#ifndef CODEBOX_API_RUN_RESULT_H_
#define CODEBOX_API_RUN_RESULT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::api {

// The box a one-shot run or an ask ran in: its driver, and whether a warm pool gave it.
struct OneShotBox {
  std::string driver;
  bool from_pool = false;
};
// {"driver", "from_pool"}.
nlohmann::json OneShotBoxToJson(const OneShotBox& box);
// `what` names it in errors ("the server's box event"); the driver is made terminal-safe.
StatusOr<OneShotBox> OneShotBoxFromJson(const nlohmann::json& j, std::string_view what);

struct RunResult {
  ExecResult result;
  OneShotBox box;
};
// ExecResultToJson's fields and "box": OneShotBoxToJson.
nlohmann::json RunResultToJson(const ExecResult& result, const OneShotBox& box);
// ExecResultFromJson and the box.
StatusOr<RunResult> RunResultFromJson(const nlohmann::json& j);

}  // namespace codebox::api

#endif  // CODEBOX_API_RUN_RESULT_H_
