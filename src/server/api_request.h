// Decoding the API's request bodies: JSON parse errors name the position, unknown fields name
// the closest known one, wrong types say what was expected; every error is kInvalidArgument
// (400). Option values go through the option schema (src/box/options_json.h), so the API takes
// exactly what the CLI and Python take.
#ifndef CODEBOX_SERVER_API_REQUEST_H_
#define CODEBOX_SERVER_API_REQUEST_H_

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/execution.h"
#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::server {

// The body as a JSON object; an empty body is {}.
StatusOr<nlohmann::json> ParseObject(std::string_view body);

// POST /v1/boxes: the client's options over the server's `defaults`; "server", "server_token"
// and "home" are the server's own and refused; box_timeout is capped at `max_lifetime`.
StatusOr<BoxOptions> DecodeBoxOptions(const nlohmann::json& object, const BoxOptions& defaults,
                                      std::chrono::milliseconds max_lifetime);

// POST .../exec: {"argv": [...], "stdin", "env", "cwd", "timeout"}.
struct ExecRequest {
  std::vector<std::string> argv;
  ExecOptions options;
};
StatusOr<ExecRequest> DecodeExecRequest(const nlohmann::json& object);

// POST .../python: {"code", "stdin", "env", "cwd", "timeout"}.
struct PythonRequest {
  std::string code;
  ExecOptions options;
};
StatusOr<PythonRequest> DecodePythonRequest(const nlohmann::json& object);

// POST .../run_code: {"code", "timeout"}.
struct CellRequest {
  std::string code;
  RunCodeOptions options;
};
StatusOr<CellRequest> DecodeCellRequest(const nlohmann::json& object);

// POST /v1/run: {"code", "stdin", "env", "timeout"} for the exec, every other key a box option.
struct RunRequest {
  std::string code;
  ExecOptions exec;
  BoxOptions box;
};
StatusOr<RunRequest> DecodeRunRequest(const nlohmann::json& object, const BoxOptions& defaults,
                                      std::chrono::milliseconds max_lifetime);

// POST /v1/ask: {"task"}, a non-empty string.
struct AskRequest {
  std::string task;
};
StatusOr<AskRequest> DecodeAskRequest(const nlohmann::json& object);

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_API_REQUEST_H_
