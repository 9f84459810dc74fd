#include "server/api_request.h"

#include <algorithm>
#include <initializer_list>

#include "box/options_json.h"
#include "codebox/option_schema.h"

namespace codebox::server {
namespace {

using nlohmann::json;

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
  ASSIGN_OR_RETURN(OptionValue v, box::OptionValueFromJson(value, key, match.spec));
  return SetBoxOption(options, key, v, key);
}

Status FinishBoxOptions(BoxOptions* options, const BoxOptions& defaults,
                        std::chrono::milliseconds max_lifetime) {
  options->home = defaults.home;
  options->server.clear();
  options->server_token.clear();
  if (max_lifetime != kNoTimeout)
    options->box_timeout = std::min(options->box_timeout, max_lifetime);
  return options->Validate();
}

}  // namespace

StatusOr<json> ParseObject(std::string_view body) {
  if (body.empty()) return json::object();
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 9: ...".
    std::string what = e.what();
    size_t bracket = what.find("] ");
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    return InvalidArgument("the request body is not valid JSON (byte " + std::to_string(e.byte) +
                           "): " + what);
  }
  if (!j.is_object()) {
    return InvalidArgument(std::string("the request body must be a JSON object, got ") +
                           j.type_name());
  }
  return j;
}

StatusOr<BoxOptions> DecodeBoxOptions(const json& object, const BoxOptions& defaults,
                                      std::chrono::milliseconds max_lifetime) {
  BoxOptions options = defaults;
  for (const auto& [key, value] : object.items()) RETURN_IF_ERROR(SetBoxKey(&options, key, value));
  RETURN_IF_ERROR(FinishBoxOptions(&options, defaults, max_lifetime));
  return options;
}

StatusOr<ExecRequest> DecodeExecRequest(const json& object) {
  RETURN_IF_ERROR(CheckFields(object, ExecFields()));
  ExecRequest request;
  auto argv = object.find("argv");
  if (argv == object.end() || argv->is_null()) {
    return InvalidArgument("the field 'argv' is required: a non-empty list of strings");
  }
  if (!argv->is_array() || argv->empty()) {
    return InvalidArgument("'argv' must be a non-empty list of strings");
  }
  for (const json& arg : *argv) {
    if (!arg.is_string()) {
      return InvalidArgument(std::string("'argv' must hold strings only, got a ") +
                             arg.type_name());
    }
    request.argv.push_back(arg.get<std::string>());
  }
  ASSIGN_OR_RETURN(request.options, box::ExecOptionsFromJson(Without(object, {"argv"})));
  return request;
}

StatusOr<PythonRequest> DecodePythonRequest(const json& object) {
  RETURN_IF_ERROR(CheckFields(object, PythonFields()));
  PythonRequest request;
  ASSIGN_OR_RETURN(request.code, RequiredString(object, "code"));
  ASSIGN_OR_RETURN(request.options, box::ExecOptionsFromJson(Without(object, {"code"})));
  return request;
}

StatusOr<CellRequest> DecodeCellRequest(const json& object) {
  RETURN_IF_ERROR(CheckFields(object, CellFields()));
  CellRequest request;
  ASSIGN_OR_RETURN(request.code, RequiredString(object, "code"));
  // The timeout reads as an exec's does: seconds, or "none".
  ASSIGN_OR_RETURN(ExecOptions timing, box::ExecOptionsFromJson(Without(object, {"code"})));
  request.options.timeout = timing.timeout;
  return request;
}

StatusOr<RunRequest> DecodeRunRequest(const json& object, const BoxOptions& defaults,
                                      std::chrono::milliseconds max_lifetime) {
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
  ASSIGN_OR_RETURN(request.exec, box::ExecOptionsFromJson(exec));
  RETURN_IF_ERROR(FinishBoxOptions(&request.box, defaults, max_lifetime));
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
