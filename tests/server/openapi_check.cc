#include "tests/server/openapi_check.h"

#include <algorithm>

#include "server/api.h"

namespace codebox::testing {

using nlohmann::json;

OpenApiChecker::OpenApiChecker() { doc_ = json::parse(server::OpenApiDocument()); }

const json& OpenApiChecker::Schema(const std::string& name) const {
  return doc_["components"]["schemas"].at(name);
}

const json& OpenApiChecker::Resolve(const json& schema) const {
  if (schema.is_object() && schema.contains("$ref")) {
    std::string ref = schema["$ref"];
    const std::string prefix = "#/components/schemas/";
    return Resolve(Schema(ref.substr(prefix.size())));
  }
  return schema;
}

namespace {
bool HasOneType(const json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "integer") return value.is_number_integer();
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  return false;
}

// "type": "string", or a list of types ("type": ["string", "null"]).
bool HasType(const json& value, const json& types) {
  if (types.is_string()) return HasOneType(value, types.get<std::string>());
  if (!types.is_array()) return false;
  return std::any_of(types.begin(), types.end(), [&](const json& t) {
    return t.is_string() && HasOneType(value, t.get<std::string>());
  });
}
}  // namespace

std::string OpenApiChecker::CheckValue(const json& raw, const json& value,
                                       const std::string& where) const {
  const json& schema = Resolve(raw);
  if (schema.contains("allOf")) {
    for (const json& part : schema["allOf"]) {
      std::string e = CheckValue(part, value, where);
      if (!e.empty()) return e;
    }
  }
  if (schema.contains("oneOf")) {
    bool any = std::any_of(schema["oneOf"].begin(), schema["oneOf"].end(),
                           [&](const json& s) { return CheckValue(s, value, where).empty(); });
    if (!any) return where + ": fits none of oneOf: " + value.dump();
  }
  if (schema.contains("type") && !HasType(value, schema["type"])) {
    return where + ": expected " + schema["type"].dump() + ", got " + value.dump();
  }
  if (schema.contains("const") && value != schema["const"]) return where + ": not the const";
  if (schema.contains("enum")) {
    const json& e = schema["enum"];
    if (std::find(e.begin(), e.end(), value) == e.end()) {
      return where + ": " + value.dump() + " is not one of " + e.dump();
    }
  }
  if (value.is_object()) {
    for (const json& name : schema.value("required", json::array())) {
      if (!value.contains(name.get<std::string>())) {
        return where + ": required property '" + name.get<std::string>() + "' missing";
      }
    }
    if (schema.contains("properties")) {
      for (const auto& [key, sub] : schema["properties"].items()) {
        if (!value.contains(key)) continue;
        std::string e = CheckValue(sub, value[key], where + "." + key);
        if (!e.empty()) return e;
      }
    }
    if (schema.contains("additionalProperties") && schema["additionalProperties"].is_object()) {
      for (const auto& [key, sub] : value.items()) {
        std::string e = CheckValue(schema["additionalProperties"], sub, where + "." + key);
        if (!e.empty()) return e;
      }
    }
  }
  if (value.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < value.size(); ++i) {
      std::string e = CheckValue(schema["items"], value[i], where + "[" + std::to_string(i) + "]");
      if (!e.empty()) return e;
    }
  }
  return "";
}

std::string OpenApiChecker::Check(std::string_view method, std::string_view route, int status,
                                  std::string_view content_type, std::string_view body) const {
  std::string m(method);
  std::transform(m.begin(), m.end(), m.begin(), ::tolower);
  const json& paths = doc_["paths"];
  std::string r(route);
  if (!paths.contains(r)) return "route " + r + " is not documented";
  if (!paths[r].contains(m)) {
    // A method the route does not take: 405 with the API's error body.
    if (status != 405) return std::string(method) + " " + r + " is not documented";
    json value = json::parse(body, nullptr, false);
    return CheckValue(Schema("Error"), value, std::string(method) + " " + r + " 405");
  }
  const json& responses = paths[r][m]["responses"];
  std::string code = std::to_string(status);
  std::string where = std::string(method) + " " + r + " " + code;
  if (!responses.contains(code)) return where + ": status not documented";
  const json& response = responses[code];
  std::string type(content_type.substr(0, content_type.find(';')));
  if (!response.contains("content")) {
    return body.empty() ? "" : where + ": documented without a body, got " + std::string(body);
  }
  if (!response["content"].contains(type))
    return where + ": content type " + type + " not documented";
  if (type != "application/json") return "";
  json value = json::parse(body, nullptr, false);
  if (value.is_discarded()) return where + ": body is not JSON";
  return CheckValue(response["content"][type]["schema"], value, where);
}

}  // namespace codebox::testing
