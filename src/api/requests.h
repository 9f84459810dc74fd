// The HTTP API's request bodies: one struct per route's body, one encoder (the remote client
// sends it) and one checked decoder (the server reads it). The decoders check shape only: a
// field of the wrong type, an unknown field (naming the closest known one) or a missing one is
// kInvalidArgument (400); how much a request may ask for is the server's to bound
// (server/api_request.h, Ceilings). Option values go through the option schema
// (options/options_json.h), so the API takes exactly what the CLI and Python take.
#ifndef CODEBOX_API_REQUESTS_H_
#define CODEBOX_API_REQUESTS_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "codebox/box.h"
#include "codebox/option_schema.h"
#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::api {

// POST /v1/boxes: box options by the schema's names and aliases over the server's `defaults`.
// "server", "server_token" and "home" are the server's own: the decoder refuses them, the
// encoder leaves them (and "prestart", which only a local box does) out.
nlohmann::json BoxOptionsRequestToJson(const BoxOptions& options);
StatusOr<BoxOptions> BoxOptionsRequestFromJson(const nlohmann::json& object,
                                               const BoxOptions& defaults);

// POST /v1/boxes/{id}/exec: {"argv": [...], "stdin", "env", "cwd", "timeout"}.
struct ExecRequest {
  std::vector<std::string> argv;
  ExecOptions options;
};
nlohmann::json ExecRequestToJson(const ExecRequest& request);
StatusOr<ExecRequest> ExecRequestFromJson(const nlohmann::json& object);

// POST .../processes: an exec request with "background": true (or left out) and "ring_bytes";
// the decoded options have background set.
nlohmann::json StartRequestToJson(const ExecRequest& request);
StatusOr<ExecRequest> StartRequestFromJson(const nlohmann::json& object);

// POST .../processes/{pid}/stdin: {"text": "...", "close": false}.
struct StdinRequest {
  std::string text;
  bool close = false;  // end the process's stdin after the text
};
nlohmann::json StdinRequestToJson(const StdinRequest& request);
StatusOr<StdinRequest> StdinRequestFromJson(const nlohmann::json& object);

// POST .../processes/{pid}/signal: {"signal": 15}; the decoder also takes a name ("SIGTERM",
// "TERM").
nlohmann::json SignalRequestToJson(int signal);
StatusOr<int> SignalRequestFromJson(const nlohmann::json& object);

// POST .../python: {"code", "stdin", "env", "cwd", "timeout"}.
struct PythonRequest {
  std::string code;
  ExecOptions options;
};
nlohmann::json PythonRequestToJson(const PythonRequest& request);
StatusOr<PythonRequest> PythonRequestFromJson(const nlohmann::json& object);

// POST .../run_code: {"code", "timeout"}; the timeout reads as an exec's (seconds, "none").
struct CellRequest {
  std::string code;
  std::optional<std::chrono::milliseconds> timeout;
};
nlohmann::json CellRequestToJson(const CellRequest& request);
StatusOr<CellRequest> CellRequestFromJson(const nlohmann::json& object);

// POST /v1/run: {"code", "stdin", "env", "timeout"} for the exec, every other key a box option
// (over `defaults`). The box lives for this one exec, so the encoder sends the box's
// environment and the exec's as one "env" (the exec's over the box's); a one-shot run takes no
// cwd.
struct RunRequest {
  std::string code;
  ExecOptions exec;
  BoxOptions box;
};
StatusOr<nlohmann::json> RunRequestToJson(const RunRequest& request);
StatusOr<RunRequest> RunRequestFromJson(const nlohmann::json& object, const BoxOptions& defaults);

// POST .../packages: {"packages": [...], "index_url": "..." | null, "timeout": s | null}.
struct PackagesRequest {
  std::vector<std::string> packages;
  InstallOptions options;
};
nlohmann::json PackagesRequestToJson(const PackagesRequest& request);
StatusOr<PackagesRequest> PackagesRequestFromJson(const nlohmann::json& object);

// PUT .../network: {"network": "none" | "allow" | "open", "allow_hosts": [...]} (either may be
// left out: allow and no hosts); checked as the box options are.
struct NetworkRequest {
  NetworkMode network = NetworkMode::kAllow;
  std::vector<std::string> allow_hosts;
};
nlohmann::json NetworkRequestToJson(const NetworkRequest& request);
StatusOr<NetworkRequest> NetworkRequestFromJson(const nlohmann::json& object);

// POST /v1/ask: {"task"}, a string with more than white space.
struct AskRequest {
  std::string task;
};
nlohmann::json AskRequestToJson(const AskRequest& request);
StatusOr<AskRequest> AskRequestFromJson(const nlohmann::json& object);

// The fields (names and aliases) each decoder takes, by openapi.json's schema name
// ("ExecRequest", "StartProcessRequest", ...): tests compare them with the document. Empty for
// a name that is not a request.
std::vector<std::string> RequestFieldNames(std::string_view schema_name);

}  // namespace codebox::api

#endif  // CODEBOX_API_REQUESTS_H_
