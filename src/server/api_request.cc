#include "server/api_request.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "base/json.h"

namespace codebox::server {
namespace {

using nlohmann::json;

// A ring larger than this the agent refuses (protocol::msg::kMaxRingBytes).
constexpr uint64_t kMaxRingBytes = 64ull << 20;

std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}
std::string Seconds(std::chrono::milliseconds d) { return Number(d.count() / 1000.0) + " s"; }

Status OverCeiling(std::string_view option, const std::string& value, const std::string& ceiling,
                   std::string_view flag) {
  return InvalidArgument(std::string(option) + " " + value + " is over this server's ceiling " +
                         ceiling + " (codebox serve " + std::string(flag) +
                         "); ask for at most that");
}

// A timeout under its ceiling: "none" becomes the ceiling, more is refused.
Status CapTimeout(std::chrono::milliseconds* timeout, std::chrono::milliseconds ceiling,
                  std::string_view option, std::string_view flag) {
  if (ceiling == kNoTimeout || *timeout <= ceiling) return Status::Ok();
  if (*timeout == kNoTimeout) {
    *timeout = ceiling;
    return Status::Ok();
  }
  return OverCeiling(option, Seconds(*timeout), Seconds(ceiling), flag);
}

Status CapExecTimeout(ExecOptions* options, const Ceilings& ceilings) {
  if (!options->timeout) return Status::Ok();  // the box's exec_timeout, capped at its create
  return CapTimeout(&*options->timeout, ceilings.exec_timeout, "timeout", "--max-exec-timeout");
}

Status FinishBoxOptions(BoxOptions* options, const BoxOptions& defaults,
                        const Ceilings& ceilings) {
  options->home = defaults.home;
  options->server.clear();
  options->server_token.clear();
  RETURN_IF_ERROR(ApplyCeilings(options, ceilings));
  return options->Validate();
}

}  // namespace

StatusOr<json> ParseObject(std::string_view body) {
  if (body.empty()) return json::object();
  // The size was bounded by --max-body already; the nesting bound is what keeps a client's
  // value from overflowing the stack when an error or a log echoes it.
  ASSIGN_OR_RETURN(json j, base::ParseJson(body, {.max_bytes = body.size()}, "the request body"));
  if (!j.is_object()) {
    return InvalidArgument(std::string("the request body must be a JSON object, got ") +
                           j.type_name());
  }
  return j;
}

double Ceilings::HostCpus() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1.0 : static_cast<double>(n);
}

Status ApplyCeilings(BoxOptions* o, const Ceilings& c) {
  RETURN_IF_ERROR(CapTimeout(&o->box_timeout, c.box_lifetime, "box_timeout", "--max-lifetime"));
  RETURN_IF_ERROR(
      CapTimeout(&o->exec_timeout, c.exec_timeout, "exec_timeout", "--max-exec-timeout"));
  auto count = [](uint64_t n) { return std::to_string(n); };
  if (o->output_limit_bytes > c.output_limit_bytes) {
    return OverCeiling("output_limit_bytes", count(o->output_limit_bytes),
                       count(c.output_limit_bytes), "--max-output-limit");
  }
  if (o->memory_mib > c.memory_mib) {
    return OverCeiling("memory_mib", count(o->memory_mib), count(c.memory_mib), "--max-memory");
  }
  if (o->cpus > c.cpus) return OverCeiling("cpus", Number(o->cpus), Number(c.cpus), "--max-cpus");
  if (o->disk_mib > c.disk_mib) {
    return OverCeiling("disk_mib", count(o->disk_mib), count(c.disk_mib), "--max-disk");
  }
  if (o->max_processes > c.max_processes) {
    return OverCeiling("max_processes", count(o->max_processes), count(c.max_processes),
                       "--max-box-processes");
  }
  if (o->max_open_files > c.max_open_files) {
    return OverCeiling("max_open_files", count(o->max_open_files), count(c.max_open_files),
                       "--max-box-open-files");
  }
  if (o->network_max_bytes > c.network_max_bytes) {
    return OverCeiling("network_max_bytes", count(o->network_max_bytes),
                       count(c.network_max_bytes), "--max-network-bytes");
  }
  return Status::Ok();
}

StatusOr<BoxOptions> DecodeBoxOptions(const json& object, const BoxOptions& defaults,
                                      const Ceilings& ceilings) {
  ASSIGN_OR_RETURN(BoxOptions options, api::BoxOptionsRequestFromJson(object, defaults));
  RETURN_IF_ERROR(FinishBoxOptions(&options, defaults, ceilings));
  return options;
}

StatusOr<api::ExecRequest> DecodeExecRequest(const json& object, const Ceilings& ceilings) {
  ASSIGN_OR_RETURN(api::ExecRequest request, api::ExecRequestFromJson(object));
  RETURN_IF_ERROR(CapExecTimeout(&request.options, ceilings));
  return request;
}

StatusOr<api::ExecRequest> DecodeStartRequest(const json& object, const Ceilings& ceilings) {
  ASSIGN_OR_RETURN(api::ExecRequest request, api::StartRequestFromJson(object));
  const uint64_t ring_ceiling = std::min<uint64_t>(ceilings.output_limit_bytes, kMaxRingBytes);
  const bool asked = object.contains("ring_bytes") && !object["ring_bytes"].is_null();
  if (asked && request.options.ring_bytes > ring_ceiling) {
    return OverCeiling("ring_bytes", std::to_string(request.options.ring_bytes),
                       std::to_string(ring_ceiling), "--max-output-limit");
  }
  request.options.ring_bytes = std::min(request.options.ring_bytes, ring_ceiling);
  RETURN_IF_ERROR(CapExecTimeout(&request.options, ceilings));
  return request;
}

StatusOr<api::PythonRequest> DecodePythonRequest(const json& object, const Ceilings& ceilings) {
  ASSIGN_OR_RETURN(api::PythonRequest request, api::PythonRequestFromJson(object));
  RETURN_IF_ERROR(CapExecTimeout(&request.options, ceilings));
  return request;
}

StatusOr<api::CellRequest> DecodeCellRequest(const json& object, const Ceilings& ceilings) {
  ASSIGN_OR_RETURN(api::CellRequest request, api::CellRequestFromJson(object));
  ExecOptions timing{.timeout = request.timeout};
  RETURN_IF_ERROR(CapExecTimeout(&timing, ceilings));
  request.timeout = timing.timeout;
  return request;
}

StatusOr<api::RunRequest> DecodeRunRequest(const json& object, const BoxOptions& defaults,
                                           const Ceilings& ceilings) {
  ASSIGN_OR_RETURN(api::RunRequest request, api::RunRequestFromJson(object, defaults));
  RETURN_IF_ERROR(CapExecTimeout(&request.exec, ceilings));
  RETURN_IF_ERROR(FinishBoxOptions(&request.box, defaults, ceilings));
  return request;
}

}  // namespace codebox::server
