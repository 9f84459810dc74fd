// A code cell's outcome as JSON (POST /v1/boxes/{id}/run_code, its `result` and `done` events,
// and an ask step's result): the server's encoder and the clients' checked decoder. Everything
// in it came out of a box's kernel.
#ifndef CODEBOX_API_EXECUTION_H_
#define CODEBOX_API_EXECUTION_H_

#include <nlohmann/json.hpp>
#include <string_view>

#include "codebox/execution.h"
#include "codebox/status.h"

namespace codebox::api {

// {"data": {MIME: text}, "is_main_result"}: one `result` event, and one entry of "results".
nlohmann::json CellResultToJson(const CellResult& result);
// `what` names it in errors ("the server's result event").
StatusOr<CellResult> CellResultFromJson(const nlohmann::json& j, std::string_view what);

// {"logs": {"stdout": [...], "stderr": [...]}, "results": [...], "error": null or
//  {"name", "value", "traceback"}, "execution_count", "duration_ms", "timed_out",
//  "kernel_restarted", "out_of_memory", "output_truncated", "driver"}.
nlohmann::json ExecutionToJson(const Execution& execution);
// At most one main result; the driver made terminal-safe; every field but "error"'s name may
// be absent.
StatusOr<Execution> ExecutionFromJson(const nlohmann::json& j);

}  // namespace codebox::api

#endif  // CODEBOX_API_EXECUTION_H_
