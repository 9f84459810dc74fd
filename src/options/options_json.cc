#include "options/options_json.h"

#include "base/json.h"

namespace codebox::options {
namespace {

using nlohmann::json;

template <class Options>
StatusOr<Options> FromJson(const json& object, const OptionSchema& schema,
                           Status (*set)(Options*, std::string_view, const OptionValue&,
                                         std::string_view)) {
  if (!object.is_object()) {
    return InvalidArgument("options must be a JSON object, got " + std::string(object.type_name()));
  }
  Options options;
  for (const auto& [key, value] : object.items()) {
    OptionMatch match = FindOption(schema, key);
    if (!match) return UnknownOptionError(schema, key);
    ASSIGN_OR_RETURN(OptionValue v, OptionValueFromJson(value, key, match.spec));
    RETURN_IF_ERROR(set(&options, key, v, key));
  }
  return options;
}

template <class Options>
json ToJson(const Options& options, const OptionSchema& schema,
            OptionValue (*get)(const Options&, std::string_view)) {
  json out = json::object();
  for (const OptionSpec& spec : schema)
    out[std::string(spec.name)] = OptionValueToJson(get(options, spec.name));
  return out;
}

// {"name": ..., "value": ..., "hosts": [...]}: a secret as an object, in its text form. Errors
// never quote the value.
StatusOr<std::string> SecretTextFromJson(const json& item, std::string_view label) {
  const std::string what = std::string(label) +
                           ": a secret is {\"name\": ..., \"value\": ..., "
                           "\"hosts\": [...]} with strings only";
  if (item.size() != 3 || !item.contains("name") || !item.contains("value") ||
      !item.contains("hosts") || !item["name"].is_string() || !item["value"].is_string() ||
      !item["hosts"].is_array()) {
    return InvalidArgument(what);
  }
  Secret secret{.name = item["name"].get<std::string>(), .value = item["value"].get<std::string>()};
  for (const json& host : item["hosts"]) {
    if (!host.is_string()) return InvalidArgument(what);
    secret.hosts.push_back(host.get<std::string>());
  }
  auto text = SecretOptionText(secret);
  if (!text.ok()) return text.status().WithContext(label);
  return text;
}

}  // namespace

StatusOr<OptionValue> OptionValueFromJson(const json& j, std::string_view label,
                                          const OptionSpec* spec) {
  // A list option takes an array of strings; without the spec, so does an array whose first
  // item is a string (an environment's is a [name, value] pair).
  const bool list = j.is_array() && (spec != nullptr ? spec->type == OptionType::kList
                                                     : !j.empty() && j.front().is_string());
  if (list) {
    OptionValue::List items;
    for (const json& item : j) {
      if (item.is_object() && spec != nullptr && spec->name == "secrets") {
        ASSIGN_OR_RETURN(std::string text, SecretTextFromJson(item, label));
        items.push_back(std::move(text));
        continue;
      }
      if (!item.is_string()) {
        return InvalidArgument(std::string(label) + ": a list must hold strings, got " +
                               base::JsonExcerpt(item));
      }
      items.push_back(item.get<std::string>());
    }
    return OptionValue(std::move(items));
  }
  switch (j.type()) {
    case json::value_t::null:
      return OptionValue();
    case json::value_t::boolean:
      return OptionValue(j.get<bool>());
    case json::value_t::number_integer:
      return OptionValue(j.get<int64_t>());
    case json::value_t::number_unsigned:
      return OptionValue(j.get<uint64_t>());
    case json::value_t::number_float:
      return OptionValue(j.get<double>());
    case json::value_t::string:
      return OptionValue(j.get<std::string>());
    case json::value_t::object: {
      OptionValue::Environment env;
      for (const auto& [k, v] : j.items()) {
        if (!v.is_string()) {
          return InvalidArgument(std::string(label) + ": the value of " + base::Excerpt(k) +
                                 " must be a string, got " + v.type_name());
        }
        env.emplace_back(k, v.get<std::string>());
      }
      return OptionValue(std::move(env));
    }
    case json::value_t::array: {
      OptionValue::Environment env;
      for (const json& pair : j) {
        if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string()) {
          return InvalidArgument(std::string(label) +
                                 ": a list must hold [name, value] pairs of strings, got " +
                                 base::JsonExcerpt(pair));
        }
        env.emplace_back(pair[0].get<std::string>(), pair[1].get<std::string>());
      }
      return OptionValue(std::move(env));
    }
    default:
      return InvalidArgument(std::string(label) + ": a JSON " + j.type_name() +
                             " is not an option value");
  }
}

json OptionValueToJson(const OptionValue& value) {
  using K = OptionValue::Kind;
  switch (value.kind()) {
    case K::kNull:
      return nullptr;
    case K::kBool:
      return value.as_bool();
    case K::kInteger:
      return value.as_integer();
    case K::kNumber:
      return value.as_number();
    case K::kString:
      return value.as_string();
    case K::kEnvironment: {
      json env = json::object();
      for (const auto& [k, v] : value.as_environment()) env[k] = v;
      return env;
    }
    case K::kList:
      return value.as_list();
  }
  return nullptr;
}

StatusOr<BoxOptions> BoxOptionsFromJson(const json& object) {
  ASSIGN_OR_RETURN(BoxOptions options, FromJson(object, BoxOptionSchema(), &SetBoxOption));
  RETURN_IF_ERROR(options.Validate());
  return options;
}

StatusOr<ExecOptions> ExecOptionsFromJson(const json& object) {
  return FromJson(object, ExecOptionSchema(), &SetExecOption);
}

json BoxOptionsToJson(const BoxOptions& options) {
  return ToJson(options, BoxOptionSchema(), &GetBoxOption);
}

json ExecOptionsToJson(const ExecOptions& options) {
  return ToJson(options, ExecOptionSchema(), &GetExecOption);
}

std::string BoxShapeKey(const BoxOptions& options) {
  // Length-prefixed rather than JSON: a path need not be UTF-8, and two distinct values must
  // never give one key.
  std::string key;
  for (const OptionSpec& spec : BoxOptionSchema()) {
    if (!spec.shapes_box) continue;
    OptionValue v = GetBoxOption(options, spec.name);
    std::string value =
        v.kind() == OptionValue::Kind::kString ? v.as_string() : FormatOptionValue(v);
    if (v.kind() == OptionValue::Kind::kList) {  // length-prefixed entries: two lists never
      value.clear();                             // give one text
      for (const std::string& item : v.as_list()) {
        value += std::to_string(item.size()) + ' ' + item + ' ';
      }
    }
    key += std::string(spec.name) + ' ' + std::to_string(value.size()) + ' ' + value + '\n';
  }
  return key;
}

}  // namespace codebox::options
