#include "server/api_request.h"

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <thread>

#include "base/json.h"
#include "options/options_json.h"
#include "codebox/option_schema.h"

namespace codebox::server {
namespace {

using nlohmann::json;

// A ring larger than this the agent refuses (protocol::msg::kMaxRingBytes).
constexpr uint64_t kMaxRingBytes = 64ull << 20;

// A body field that is not an option (argv, code), as a schema entry so that unknown-field
// errors can suggest it (ClosestOptionName).
OptionSpec Field(std::string_view name) { return OptionSpec{.name = name}; }

OptionSchema WithFields(const OptionSchema& base, std::initializer_list<std::string_view> extra) {
  OptionSchema schema = base;
  for (std::string_view name : extra) schema.push_back(Field(name));
  return schema;
}

const OptionSchema& ExecFields() {
  static const OptionSchema schema = WithFields(ExecOptionSchema(), {"argv"});
  return schema;
}
const OptionSchema& StartFields() {
  static const OptionSchema schema =
      WithFields(ExecOptionSchema(), {"argv", "background", "ring_bytes"});
  return schema;
}
const OptionSchema& StdinFields() {
  static const OptionSchema schema = WithFields({}, {"text", "close"});
  return schema;
}
const OptionSchema& SignalFields() {
  static const OptionSchema schema = WithFields({}, {"signal"});
  return schema;
}
const OptionSchema& PythonFields() {
  static const OptionSchema schema = WithFields(ExecOptionSchema(), {"code"});
  return schema;
}
const OptionSchema& CellFields() {
  static const OptionSchema schema = WithFields({}, {"code", "timeout"});
  return schema;
}
const OptionSchema& AskFields() {
  static const OptionSchema schema = WithFields({}, {"task"});
  return schema;
}
const OptionSchema& RunFields() {
  static const OptionSchema schema = WithFields(BoxOptionSchema(), {"code", "stdin"});
  return schema;
}

Status CheckFields(const json& object, const OptionSchema& fields) {
  for (const auto& [key, value] : object.items()) {
    if (!FindOption(fields, key)) return UnknownOptionError(fields, key, "field");
  }
  return Status::Ok();
}

StatusOr<std::string> RequiredString(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) {
    return InvalidArgument(std::string("the field '") + name + "' is required");
  }
  if (!it->is_string()) {
    return InvalidArgument(std::string("'") + name + "' must be a string, got " + it->type_name());
  }
  return it->get<std::string>();
}

// The object without `names`, for ExecOptionsFromJson.
json Without(const json& object, std::initializer_list<const char*> names) {
  json rest = object;
  for (const char* name : names) rest.erase(name);
  return rest;
}

Status RefuseServerOwned(const OptionSpec& spec, std::string_view key) {
  if (spec.name == "server" || spec.name == "server_token" || spec.name == "home") {
    return InvalidArgument("'" + std::string(key) +
                           "' is set by the server, not by a request; leave it out");
  }
  return Status::Ok();
}

Status SetBoxKey(BoxOptions* options, const std::string& key, const json& value) {
  OptionMatch match = FindOption(BoxOptionSchema(), key);
  if (!match) return UnknownOptionError(BoxOptionSchema(), key, "box option");
  RETURN_IF_ERROR(RefuseServerOwned(*match.spec, key));
  ASSIGN_OR_RETURN(OptionValue v, options::OptionValueFromJson(value, key, match.spec));
  return SetBoxOption(options, key, v, key);
}

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

// "argv": a non-empty list of strings.
StatusOr<std::vector<std::string>> DecodeArgv(const json& object) {
  auto argv = object.find("argv");
  if (argv == object.end() || argv->is_null()) {
    return InvalidArgument("the field 'argv' is required: a non-empty list of strings");
  }
  if (!argv->is_array() || argv->empty()) {
    return InvalidArgument("'argv' must be a non-empty list of strings");
  }
  std::vector<std::string> out;
  for (const json& arg : *argv) {
    if (!arg.is_string()) {
      return InvalidArgument(std::string("'argv' must hold strings only, got a ") +
                             arg.type_name());
    }
    out.push_back(arg.get<std::string>());
  }
  return out;
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
  BoxOptions options = defaults;
  for (const auto& [key, value] : object.items()) RETURN_IF_ERROR(SetBoxKey(&options, key, value));
  RETURN_IF_ERROR(FinishBoxOptions(&options, defaults, ceilings));
  return options;
}

StatusOr<ExecRequest> DecodeExecRequest(const json& object, const Ceilings& ceilings) {
  RETURN_IF_ERROR(CheckFields(object, ExecFields()));
  ExecRequest request;
  ASSIGN_OR_RETURN(request.argv, DecodeArgv(object));
  ASSIGN_OR_RETURN(request.options, options::ExecOptionsFromJson(Without(object, {"argv"})));
  RETURN_IF_ERROR(CapExecTimeout(&request.options, ceilings));
  return request;
}

StatusOr<ExecRequest> DecodeStartRequest(const json& object, const Ceilings& ceilings) {
  RETURN_IF_ERROR(CheckFields(object, StartFields()));
  ExecRequest request;
  ASSIGN_OR_RETURN(request.argv, DecodeArgv(object));
  if (auto background = object.find("background"); background != object.end()) {
    if (!background->is_boolean() || !background->get<bool>()) {
      return InvalidArgument(
          "'background' must be true here (or left out): a process that ends with the request "
          "is POST /v1/boxes/{id}/exec");
    }
  }
  request.options.background = true;
  const uint64_t ring_ceiling = std::min<uint64_t>(ceilings.output_limit_bytes, kMaxRingBytes);
  if (auto ring = object.find("ring_bytes"); ring != object.end()) {
    if (!ring->is_number_unsigned()) {
      return InvalidArgument("'ring_bytes' must be a whole number of bytes, 0.." +
                             std::to_string(ring_ceiling));
    }
    if (ring->get<uint64_t>() > ring_ceiling) {
      return OverCeiling("ring_bytes", std::to_string(ring->get<uint64_t>()),
                         std::to_string(ring_ceiling), "--max-output-limit");
    }
    request.options.ring_bytes = ring->get<uint64_t>();
  }
  request.options.ring_bytes = std::min(request.options.ring_bytes, ring_ceiling);
  ASSIGN_OR_RETURN(ExecOptions options,
                   options::ExecOptionsFromJson(Without(object, {"argv", "background", "ring_bytes"})));
  options.background = true;
  options.ring_bytes = request.options.ring_bytes;
  request.options = std::move(options);
  RETURN_IF_ERROR(CapExecTimeout(&request.options, ceilings));
  return request;
}

StatusOr<StdinRequest> DecodeStdinRequest(const json& object) {
  RETURN_IF_ERROR(CheckFields(object, StdinFields()));
  StdinRequest request;
  if (auto text = object.find("text"); text != object.end()) {
    if (!text->is_string()) return InvalidArgument("'text' must be a string");
    request.data = text->get<std::string>();
  }
  if (auto close = object.find("close"); close != object.end()) {
    if (!close->is_boolean()) return InvalidArgument("'close' must be true or false");
    request.close = close->get<bool>();
  }
  return request;
}

StatusOr<int> DecodeSignalRequest(const json& object) {
  RETURN_IF_ERROR(CheckFields(object, SignalFields()));
  auto signal = object.find("signal");
  if (signal == object.end()) return InvalidArgument("the field 'signal' is required");
  if (signal->is_number_unsigned()) {
    uint64_t n = signal->get<uint64_t>();
    if (n >= 1 && n <= 64) return static_cast<int>(n);
  } else if (signal->is_string()) {
    std::string name = signal->get<std::string>();
    if (name.rfind("SIG", 0) == 0) name = name.substr(3);
    static constexpr std::pair<std::string_view, int> kNames[] = {
        {"HUP", 1},   {"INT", 2},   {"QUIT", 3},  {"KILL", 9},  {"USR1", 10},
        {"USR2", 12}, {"TERM", 15}, {"CONT", 18}, {"STOP", 19}, {"WINCH", 28}};
    for (const auto& [known, number] : kNames) {
      if (name == known) return number;
    }
  }
  return InvalidArgument("'signal' must be a signal number 1..64 or a name such as \"SIGTERM\", "
                         "\"INT\", \"KILL\"");
}

StatusOr<PythonRequest> DecodePythonRequest(const json& object, const Ceilings& ceilings) {
  RETURN_IF_ERROR(CheckFields(object, PythonFields()));
  PythonRequest request;
  ASSIGN_OR_RETURN(request.code, RequiredString(object, "code"));
  ASSIGN_OR_RETURN(request.options, options::ExecOptionsFromJson(Without(object, {"code"})));
  RETURN_IF_ERROR(CapExecTimeout(&request.options, ceilings));
  return request;
}

StatusOr<CellRequest> DecodeCellRequest(const json& object, const Ceilings& ceilings) {
  RETURN_IF_ERROR(CheckFields(object, CellFields()));
  CellRequest request;
  ASSIGN_OR_RETURN(request.code, RequiredString(object, "code"));
  // The timeout reads as an exec's does: seconds, or "none".
  ASSIGN_OR_RETURN(ExecOptions timing, options::ExecOptionsFromJson(Without(object, {"code"})));
  RETURN_IF_ERROR(CapExecTimeout(&timing, ceilings));
  request.options.timeout = timing.timeout;
  return request;
}

StatusOr<RunRequest> DecodeRunRequest(const json& object, const BoxOptions& defaults,
                                      const Ceilings& ceilings) {
  RETURN_IF_ERROR(CheckFields(object, RunFields()));
  RunRequest request;
  ASSIGN_OR_RETURN(request.code, RequiredString(object, "code"));
  json exec = json::object();
  request.box = defaults;
  for (const auto& [key, value] : object.items()) {
    if (key == "code") continue;
    if (key == "stdin" || key == "env" || key == "timeout") {
      exec[key] = value;
    } else {
      RETURN_IF_ERROR(SetBoxKey(&request.box, key, value));
    }
  }
  ASSIGN_OR_RETURN(request.exec, options::ExecOptionsFromJson(exec));
  RETURN_IF_ERROR(CapExecTimeout(&request.exec, ceilings));
  RETURN_IF_ERROR(FinishBoxOptions(&request.box, defaults, ceilings));
  return request;
}

StatusOr<AskRequest> DecodeAskRequest(const json& object) {
  RETURN_IF_ERROR(CheckFields(object, AskFields()));
  AskRequest request;
  ASSIGN_OR_RETURN(request.task, RequiredString(object, "task"));
  if (request.task.find_first_not_of(" \t\r\n") == std::string::npos) {
    return InvalidArgument("'task' is empty: say what the model should do");
  }
  return request;
}

}  // namespace codebox::server
