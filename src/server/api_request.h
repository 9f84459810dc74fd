// Decoding the API's request bodies: JSON parse errors name the position, unknown fields name
// the closest known one, wrong types say what was expected; every error is kInvalidArgument
// (400). Option values go through the option schema (src/options/options_json.h), so the API takes
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

// The body as a JSON object, nested at most 64 deep (base/json.h); an empty body is {}.
StatusOr<nlohmann::json> ParseObject(std::string_view body);

// The most any request may ask for (`codebox serve --max-*`, docs/server.md): the option
// schema's own bounds are far past what one server should grant a client. A request over one
// is refused (400) naming the option, its value and the ceiling; a timeout of "none" means "as
// long as the server allows" and is the ceiling.
struct Ceilings {
  uint64_t output_limit_bytes = 64ull << 20;
  uint64_t memory_mib = 8192;
  double cpus = HostCpus();
  uint64_t disk_mib = 16384;
  uint32_t max_processes = 4096;
  uint32_t max_open_files = 65536;
  std::chrono::milliseconds exec_timeout{std::chrono::hours(1)};
  std::chrono::milliseconds box_lifetime{std::chrono::hours(1)};  // kNoTimeout: none
  uint64_t network_max_bytes = 4ull << 30;

  // This host's cores: the default cpus ceiling.
  static double HostCpus();
};

// `options` under `ceilings`: timeouts of "none" set to the ceiling; kInvalidArgument naming the
// first option over its ceiling, its value, the ceiling and the serve flag that sets it.
Status ApplyCeilings(BoxOptions* options, const Ceilings& ceilings);

// POST /v1/boxes: the client's options over the server's `defaults`; "server", "server_token"
// and "home" are the server's own and refused; then ApplyCeilings.
StatusOr<BoxOptions> DecodeBoxOptions(const nlohmann::json& object, const BoxOptions& defaults,
                                      const Ceilings& ceilings);

// POST .../exec: {"argv": [...], "stdin", "env", "cwd", "timeout"}.
struct ExecRequest {
  std::vector<std::string> argv;
  ExecOptions options;
};
// The exec's timeout within ceilings.exec_timeout, as for every exec-like request below.
StatusOr<ExecRequest> DecodeExecRequest(const nlohmann::json& object, const Ceilings& ceilings);

// POST .../processes: an exec request with "background": true (or left out) and "ring_bytes"
// (at most --max-output-limit and 64 MiB); its timeout is none unless given.
StatusOr<ExecRequest> DecodeStartRequest(const nlohmann::json& object, const Ceilings& ceilings);

// POST .../processes/{pid}/stdin: {"text": "...", "close": false}.
struct StdinRequest {
  std::string data;
  bool close = false;  // end the process's stdin after the text
};
StatusOr<StdinRequest> DecodeStdinRequest(const nlohmann::json& object);

// POST .../processes/{pid}/signal: {"signal": 15} or {"signal": "SIGTERM"}.
StatusOr<int> DecodeSignalRequest(const nlohmann::json& object);

// POST .../python: {"code", "stdin", "env", "cwd", "timeout"}.
struct PythonRequest {
  std::string code;
  ExecOptions options;
};
StatusOr<PythonRequest> DecodePythonRequest(const nlohmann::json& object,
                                            const Ceilings& ceilings);

// POST .../run_code: {"code", "timeout"}.
struct CellRequest {
  std::string code;
  RunCodeOptions options;
};
StatusOr<CellRequest> DecodeCellRequest(const nlohmann::json& object, const Ceilings& ceilings);

// POST /v1/run: {"code", "stdin", "env", "timeout"} for the exec, every other key a box option.
struct RunRequest {
  std::string code;
  ExecOptions exec;
  BoxOptions box;
};
StatusOr<RunRequest> DecodeRunRequest(const nlohmann::json& object, const BoxOptions& defaults,
                                      const Ceilings& ceilings);

// POST /v1/ask: {"task"}, a non-empty string.
struct AskRequest {
  std::string task;
};
StatusOr<AskRequest> DecodeAskRequest(const nlohmann::json& object);

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_API_REQUEST_H_
