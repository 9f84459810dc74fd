#include "api/requests.h"

#include <chrono>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <utility>

#include "base/json_fields.h"
#include "net/egress_policy.h"
#include "options/options_json.h"

namespace codebox::api {
namespace {

using nlohmann::json;

// A body field that is not an option (argv, code), as a schema entry so that unknown-field
// errors can suggest it (ClosestOptionName).
OptionSchema WithFields(const OptionSchema& base, std::initializer_list<std::string_view> extra) {
  OptionSchema schema = base;
  for (std::string_view name : extra) schema.push_back(OptionSpec{.name = name});
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
const OptionSchema& RunFields() {
  static const OptionSchema schema = WithFields(BoxOptionSchema(), {"code", "stdin"});
  return schema;
}
const OptionSchema& PackagesFields() {
  static const OptionSchema schema = WithFields({}, {"packages", "index_url", "timeout"});
  return schema;
}
const OptionSchema& NetworkFields() {
  static const OptionSchema schema = WithFields({}, {"network", "allow_hosts"});
  return schema;
}
const OptionSchema& AskFields() {
  static const OptionSchema schema = WithFields({}, {"task"});
  return schema;
}

// The box options a request never carries: the server's own, and what only a local box does.
bool ServerOwned(std::string_view name) {
  return name == "server" || name == "server_token" || name == "home";
}

base::JsonFields Reader(const json& object, const char* what) {
  return base::JsonFields(object, what, StatusCode::kInvalidArgument);
}

Status CheckFields(const json& object, const OptionSchema& fields) {
  if (!object.is_object()) {
    return InvalidArgument(std::string("the request body must be a JSON object, got ") +
                           object.type_name());
  }
  for (const auto& [key, value] : object.items()) {
    if (!FindOption(fields, key)) return UnknownOptionError(fields, key, "field");
  }
  return Status::Ok();
}

// The object without `names`, for ExecOptionsFromJson.
json Without(const json& object, std::initializer_list<const char*> names) {
  json rest = object;
  for (const char* name : names) rest.erase(name);
  return rest;
}

// The exec options a request sends: the ones set (a null is the default, so it goes unsaid).
json ExecOptionsBody(const ExecOptions& options) {
  json body = options::ExecOptionsToJson(options);
  for (auto it = body.begin(); it != body.end();) {
    it = it->is_null() ? body.erase(it) : std::next(it);
  }
  return body;
}

// "argv": a non-empty list of strings.
StatusOr<std::vector<std::string>> DecodeArgv(const base::JsonFields& f) {
  ASSIGN_OR_RETURN(std::vector<std::string> argv, f.Strings("argv"));
  if (argv.empty()) return f.Fault("argv", "is empty: name the program to run");
  return argv;
}

Status SetBoxKey(BoxOptions* options, const std::string& key, const json& value) {
  OptionMatch match = FindOption(BoxOptionSchema(), key);
  if (!match) return UnknownOptionError(BoxOptionSchema(), key, "box option");
  if (ServerOwned(match.spec->name)) {
    return InvalidArgument("'" + key + "' is set by the server, not by a request; leave it out");
  }
  ASSIGN_OR_RETURN(OptionValue v, options::OptionValueFromJson(value, key, match.spec));
  return SetBoxOption(options, key, v, key);
}

json BoxOptionsBody(const BoxOptions& options) {
  json body = options::BoxOptionsToJson(options);
  for (const OptionSpec& spec : BoxOptionSchema()) {
    if (ServerOwned(spec.name) || spec.name == "prestart") body.erase(std::string(spec.name));
  }
  return body;
}

}  // namespace

json BoxOptionsRequestToJson(const BoxOptions& options) { return BoxOptionsBody(options); }

StatusOr<BoxOptions> BoxOptionsRequestFromJson(const json& object, const BoxOptions& defaults) {
  RETURN_IF_ERROR(CheckFields(object, BoxOptionSchema()));
  BoxOptions options = defaults;
  for (const auto& [key, value] : object.items()) RETURN_IF_ERROR(SetBoxKey(&options, key, value));
  return options;
}

json ExecRequestToJson(const ExecRequest& request) {
  json body = ExecOptionsBody(request.options);
  body["argv"] = request.argv;
  return body;
}

StatusOr<ExecRequest> ExecRequestFromJson(const json& object) {
  RETURN_IF_ERROR(CheckFields(object, ExecFields()));
  ExecRequest request;
  ASSIGN_OR_RETURN(request.argv, DecodeArgv(Reader(object, "exec request")));
  ASSIGN_OR_RETURN(request.options, options::ExecOptionsFromJson(Without(object, {"argv"})));
  return request;
}

json StartRequestToJson(const ExecRequest& request) {
  json body = ExecRequestToJson(request);
  body["background"] = true;
  body["ring_bytes"] = request.options.ring_bytes;
  return body;
}

StatusOr<ExecRequest> StartRequestFromJson(const json& object) {
  RETURN_IF_ERROR(CheckFields(object, StartFields()));
  const base::JsonFields f = Reader(object, "process start request");
  ExecRequest request;
  ASSIGN_OR_RETURN(request.argv, DecodeArgv(f));
  ASSIGN_OR_RETURN(bool background, f.Bool("background", true));
  if (!background) {
    return InvalidArgument(
        "'background' must be true here (or left out): a process that ends with the request "
        "is POST /v1/boxes/{id}/exec");
  }
  ASSIGN_OR_RETURN(int64_t ring, f.Int("ring_bytes", 0, std::numeric_limits<int64_t>::max(),
                                       static_cast<int64_t>(ExecOptions{}.ring_bytes)));
  ASSIGN_OR_RETURN(request.options, options::ExecOptionsFromJson(
                                        Without(object, {"argv", "background", "ring_bytes"})));
  request.options.background = true;
  request.options.ring_bytes = static_cast<uint64_t>(ring);
  return request;
}

json StdinRequestToJson(const StdinRequest& request) {
  return {{"text", request.text}, {"close", request.close}};
}

StatusOr<StdinRequest> StdinRequestFromJson(const json& object) {
  RETURN_IF_ERROR(CheckFields(object, StdinFields()));
  const base::JsonFields f = Reader(object, "stdin request");
  StdinRequest request;
  ASSIGN_OR_RETURN(request.text, f.String("text", ""));
  ASSIGN_OR_RETURN(request.close, f.Bool("close", false));
  return request;
}

json SignalRequestToJson(int signal) { return {{"signal", signal}}; }

StatusOr<int> SignalRequestFromJson(const json& object) {
  RETURN_IF_ERROR(CheckFields(object, SignalFields()));
  const base::JsonFields f = Reader(object, "signal request");
  const json* signal = f.Find("signal");
  if (signal == nullptr) return f.Missing("signal");
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
  return InvalidArgument(
      "'signal' must be a signal number 1..64 or a name such as \"SIGTERM\", "
      "\"INT\", \"KILL\"");
}

json PythonRequestToJson(const PythonRequest& request) {
  json body = ExecOptionsBody(request.options);
  body["code"] = request.code;
  return body;
}

StatusOr<PythonRequest> PythonRequestFromJson(const json& object) {
  RETURN_IF_ERROR(CheckFields(object, PythonFields()));
  PythonRequest request;
  ASSIGN_OR_RETURN(request.code, Reader(object, "python request").String("code"));
  ASSIGN_OR_RETURN(request.options, options::ExecOptionsFromJson(Without(object, {"code"})));
  return request;
}

json CellRequestToJson(const CellRequest& request) {
  // A cell takes only a timeout of the exec options (the rest are ExecOptions{}'s defaults).
  const json timing = ExecOptionsBody(ExecOptions{.timeout = request.timeout});
  json body = {{"code", request.code}};
  if (timing.contains("timeout")) body["timeout"] = timing["timeout"];
  return body;
}

StatusOr<CellRequest> CellRequestFromJson(const json& object) {
  RETURN_IF_ERROR(CheckFields(object, CellFields()));
  CellRequest request;
  ASSIGN_OR_RETURN(request.code, Reader(object, "run_code request").String("code"));
  ASSIGN_OR_RETURN(ExecOptions timing, options::ExecOptionsFromJson(Without(object, {"code"})));
  request.timeout = timing.timeout;
  return request;
}

StatusOr<json> RunRequestToJson(const RunRequest& request) {
  if (!request.exec.cwd.empty()) {
    return InvalidArgument("run on a server: a one-shot run takes no cwd (create a box for that)");
  }
  json body = BoxOptionsBody(request.box);
  // The box lives for this one exec: its environment and the exec's are one.
  for (const auto& [k, v] : request.exec.env) body["env"][k] = v;
  json exec = ExecOptionsBody(request.exec);
  if (exec.contains("stdin_data")) body["stdin"] = exec["stdin_data"];
  if (exec.contains("timeout")) body["timeout"] = exec["timeout"];
  body["code"] = request.code;
  return body;
}

StatusOr<RunRequest> RunRequestFromJson(const json& object, const BoxOptions& defaults) {
  RETURN_IF_ERROR(CheckFields(object, RunFields()));
  RunRequest request;
  ASSIGN_OR_RETURN(request.code, Reader(object, "run request").String("code"));
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
  return request;
}

json PackagesRequestToJson(const PackagesRequest& request) {
  json body = {{"packages", request.packages}, {"index_url", nullptr}};
  if (!request.options.index_url.empty()) body["index_url"] = request.options.index_url;
  // No "none" here: a package install always has a limit (the server's default when unsaid).
  if (request.options.timeout != kNoTimeout) {
    body["timeout"] = static_cast<double>(request.options.timeout.count()) / 1000.0;
  }
  return body;
}

StatusOr<PackagesRequest> PackagesRequestFromJson(const json& object) {
  RETURN_IF_ERROR(CheckFields(object, PackagesFields()));
  const base::JsonFields f = Reader(object, "packages request");
  PackagesRequest out;
  ASSIGN_OR_RETURN(out.packages, f.Strings("packages", std::vector<std::string>{}));
  if (out.packages.empty()) {
    return InvalidArgument("packages: give a non-empty list of package names");
  }
  ASSIGN_OR_RETURN(out.options.index_url, f.String("index_url", ""));
  if (const json* timeout = f.Find("timeout")) {
    const double s = timeout->is_number() ? timeout->get<double>() : NAN;
    if (!(s >= 0.001 && s <= 86400)) {
      return InvalidArgument("timeout: must be a number of seconds from 0.001 to 86400");
    }
    out.options.timeout = std::chrono::milliseconds(std::llround(s * 1000));
  }
  return out;
}

json NetworkRequestToJson(const NetworkRequest& request) {
  return {{"network", std::string(net::NetworkModeName(request.network))},
          {"allow_hosts", request.allow_hosts}};
}

StatusOr<NetworkRequest> NetworkRequestFromJson(const json& object) {
  RETURN_IF_ERROR(CheckFields(object, NetworkFields()));
  const base::JsonFields f = Reader(object, "network request");
  NetworkRequest out;
  ASSIGN_OR_RETURN(std::string mode, f.String("network", "allow"));
  auto parsed = net::ParseNetworkMode(mode);
  if (!parsed.ok()) return parsed.status().WithContext("network");
  out.network = *parsed;
  ASSIGN_OR_RETURN(out.allow_hosts, f.Strings("allow_hosts", std::vector<std::string>{}));
  // The box options' checks, in their words (each entry, the count, open with hosts).
  BoxOptions check;
  check.network = out.network;
  check.allow_hosts = out.allow_hosts;
  RETURN_IF_ERROR(check.Validate());
  return out;
}

json AskRequestToJson(const AskRequest& request) { return {{"task", request.task}}; }

StatusOr<AskRequest> AskRequestFromJson(const json& object) {
  RETURN_IF_ERROR(CheckFields(object, AskFields()));
  AskRequest request;
  ASSIGN_OR_RETURN(request.task, Reader(object, "ask request").String("task"));
  if (request.task.find_first_not_of(" \t\r\n") == std::string::npos) {
    return InvalidArgument("'task' is empty: say what the model should do");
  }
  return request;
}

std::vector<std::string> RequestFieldNames(std::string_view schema_name) {
  static const std::pair<std::string_view, const OptionSchema& (*)()> kRequests[] = {
      {"BoxOptions", &BoxOptionSchema},      {"ExecRequest", &ExecFields},
      {"StartProcessRequest", &StartFields}, {"StdinRequest", &StdinFields},
      {"SignalRequest", &SignalFields},      {"PythonRequest", &PythonFields},
      {"RunCodeRequest", &CellFields},       {"RunRequest", &RunFields},
      {"PackagesRequest", &PackagesFields},  {"AskRequest", &AskFields},
  };
  std::vector<std::string> names;
  for (const auto& [name, fields] : kRequests) {
    if (name != schema_name) continue;
    for (const OptionSpec& spec : fields()) {
      if (ServerOwned(spec.name)) continue;
      names.emplace_back(spec.name);
      for (const OptionAlias& alias : spec.aliases) names.emplace_back(alias.name);
    }
  }
  return names;
}

}  // namespace codebox::api
