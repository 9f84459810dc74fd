// A request body as this server takes it: parsed (JSON parse errors name the position),
// decoded (api/requests.h: unknown fields name the closest known one, wrong types say what was
// expected) and held to the server's ceilings; every error is kInvalidArgument (400).
#ifndef CODEBOX_SERVER_API_REQUEST_H_
#define CODEBOX_SERVER_API_REQUEST_H_

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/requests.h"
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

// Each route's request (api/requests.h decodes its shape) under `ceilings`: a timeout within
// ceilings.exec_timeout, and for a box its options over the server's `defaults` within
// ApplyCeilings and Validate()d.

// POST /v1/boxes.
StatusOr<BoxOptions> DecodeBoxOptions(const nlohmann::json& object, const BoxOptions& defaults,
                                      const Ceilings& ceilings);
// POST .../exec.
StatusOr<api::ExecRequest> DecodeExecRequest(const nlohmann::json& object,
                                             const Ceilings& ceilings);
// POST .../processes: "ring_bytes" at most --max-output-limit and 64 MiB; no timeout unless
// given.
StatusOr<api::ExecRequest> DecodeStartRequest(const nlohmann::json& object,
                                              const Ceilings& ceilings);
// POST .../python.
StatusOr<api::PythonRequest> DecodePythonRequest(const nlohmann::json& object,
                                                 const Ceilings& ceilings);
// POST .../run_code.
StatusOr<api::CellRequest> DecodeCellRequest(const nlohmann::json& object,
                                             const Ceilings& ceilings);
// POST /v1/run.
StatusOr<api::RunRequest> DecodeRunRequest(const nlohmann::json& object,
                                           const BoxOptions& defaults, const Ceilings& ceilings);

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_API_REQUEST_H_
