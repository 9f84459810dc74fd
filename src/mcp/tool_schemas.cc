// The tool definitions tools/list answers, and the argument check against their inputSchema.
#include <set>

#include "base/json.h"
#include "mcp/tools.h"

namespace codebox::mcp {
namespace {

using nlohmann::json;

json Timeout() {
  return {{"type", "number"},
          {"exclusiveMinimum", 0},
          {"description",
           "Seconds the call may run (default: the box's exec timeout; capped by the server)."}};
}

json Schema(json properties, json required) {
  return {{"type", "object"},
          {"properties", std::move(properties)},
          {"required", std::move(required)},
          {"additionalProperties", false}};
}

json Tool(const char* name, const char* title, const char* description, json schema,
          json annotations) {
  annotations["title"] = title;
  annotations["openWorldHint"] = false;  // a box has no network
  return {{"name", name},
          {"title", title},
          {"description", description},
          {"inputSchema", std::move(schema)},
          {"annotations", std::move(annotations)}};
}

json MakeDefinitions() {
  json path = {{"type", "string"},
               {"minLength", 1},
               {"description", "A path in the box; a relative one is under the workdir (/work)."}};
  json run_command_schema =
      Schema({{"argv",
               {{"type", "array"},
                {"items", {{"type", "string"}}},
                {"minItems", 1},
                {"description", "The program and its arguments, run without a shell."}}},
              {"cmd",
               {{"type", "string"},
                {"minLength", 1},
                {"description", "A command line, run with /bin/sh -c."}}},
              {"timeout", Timeout()}},
             json::array());
  run_command_schema["oneOf"] = {{{"required", {"argv"}}}, {{"required", {"cmd"}}}};
  json list_path = path;
  list_path["description"] = "The directory to list (default: the workdir).";
  return json::array({
      Tool("run_python", "Run Python",
           "Runs Python code as one cell of a stateful IPython session in an isolated box: "
           "variables, imports and files persist from call to call. Returns stdout, stderr, the "
           "value of the last expression, the error with its traceback, and charts "
           "(matplotlib) as PNG images.",
           Schema({{"code", {{"type", "string"}, {"description", "The Python code of the cell."}}},
                   {"timeout", Timeout()}},
                  {"code"}),
           {{"readOnlyHint", false}, {"destructiveHint", false}}),
      Tool("run_command", "Run a command",
           "Runs a command in the box (give exactly one of argv or cmd). Returns its exit code, "
           "stdout and stderr.",
           std::move(run_command_schema), {{"readOnlyHint", false}, {"destructiveHint", true}}),
      Tool("write_file", "Write a file",
           "Writes UTF-8 text to a file in the box, making missing parent directories and "
           "replacing a file that is there.",
           Schema({{"path", path},
                   {"content", {{"type", "string"}, {"description", "The text to write."}}}},
                  {"path", "content"}),
           {{"readOnlyHint", false}, {"destructiveHint", true}, {"idempotentHint", true}}),
      Tool("read_file", "Read a file",
           "Reads a file of the box: its text when it is UTF-8, a PNG or JPEG as an image, "
           "else its size.",
           Schema({{"path", path}}, {"path"}), {{"readOnlyHint", true}}),
      Tool("list_files", "List files",
           "Lists a directory of the box: each entry's type, size and name.",
           Schema({{"path", list_path}}, json::array()), {{"readOnlyHint", true}}),
      Tool("reset", "Reset the box",
           "Destroys the box and starts the next call in a fresh one: every variable and file "
           "is gone.",
           Schema(json::object(), json::array()),
           {{"readOnlyHint", false}, {"destructiveHint", true}, {"idempotentHint", true}}),
  });
}

const json* FindTool(std::string_view name) {
  for (const json& tool : ToolDefinitions()) {
    if (tool["name"].get_ref<const std::string&>() == name) return &tool;
  }
  return nullptr;
}

// What `value` should be, as the error says it: "a string", "a number > 0", ...
std::string CheckValue(const json& schema, const json& value) {
  const std::string& type = schema["type"].get_ref<const std::string&>();
  if (type == "string") {
    if (!value.is_string()) return "must be a string";
    if (schema.contains("minLength") && value.get_ref<const std::string&>().empty()) {
      return "must not be empty";
    }
  } else if (type == "number") {
    if (!value.is_number()) return "must be a number (seconds)";
    if (schema.contains("exclusiveMinimum") && !(value.get<double>() > 0)) {
      return "must be greater than 0";
    }
  } else if (type == "array") {
    if (!value.is_array()) return "must be an array of strings";
    if (schema.contains("minItems") && value.empty()) return "must not be empty";
    for (const json& item : value) {
      if (!item.is_string())
        return "must be an array of strings (found " + std::string(item.type_name()) + ")";
    }
  }
  return "";
}

}  // namespace

const json& ToolDefinitions() {
  static const json* definitions = new json(MakeDefinitions());
  return *definitions;
}

bool IsKnownTool(std::string_view name) { return FindTool(name) != nullptr; }

std::string CheckArguments(std::string_view tool_name, const json& arguments) {
  const json* tool = FindTool(tool_name);
  if (tool == nullptr) return "unknown tool";
  const json& schema = (*tool)["inputSchema"];
  const json& properties = schema["properties"];
  const std::string tool_text(tool_name);
  for (const auto& [name, value] : arguments.items()) {
    if (!properties.contains(name)) {
      std::string known;
      for (const auto& [p, unused] : properties.items()) known += (known.empty() ? "" : ", ") + p;
      return "unknown argument '" + base::Excerpt(name) + "': " + tool_text + " takes " +
             (known.empty() ? std::string("no arguments") : known);
    }
    if (std::string problem = CheckValue(properties[name], value); !problem.empty()) {
      return "argument '" + base::Excerpt(name) + "' of " + tool_text + " " + problem;
    }
  }
  for (const json& name : schema["required"]) {
    if (!arguments.contains(name.get<std::string>())) {
      return "missing required argument '" + name.get<std::string>() + "' of " + tool_text + " (" +
             properties[name.get<std::string>()]["description"].get<std::string>() + ")";
    }
  }
  if (schema.contains("oneOf")) {
    std::string names;
    int given = 0;
    for (const json& alternative : schema["oneOf"]) {
      const std::string name = alternative["required"][0].get<std::string>();
      names += (names.empty() ? "'" : " or '") + name + "'";
      given += arguments.contains(name) ? 1 : 0;
    }
    if (given != 1) return tool_text + " takes exactly one of " + names;
  }
  return "";
}

}  // namespace codebox::mcp
