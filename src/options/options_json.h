// BoxOptions and ExecOptions as JSON objects, key for key the option schema's names and
// aliases (the form the HTTP API takes: POST /v1/boxes with the box options as an object).
// Values are in each option's unit: sizes as integers, durations as seconds or "none", the
// environment as an object (or a list of [name, value] pairs); null is the default.
#ifndef CODEBOX_OPTIONS_OPTIONS_JSON_H_
#define CODEBOX_OPTIONS_OPTIONS_JSON_H_

#include <nlohmann/json.hpp>

#include "codebox/option_schema.h"

namespace codebox::options {

// A JSON value as an OptionValue; an error (naming `label`) for arrays that are not
// [name, value] string pairs or (for a list option, or an array of strings) strings, objects
// with non-string values, and numbers out of range. `spec`, when given, says which an array is.
StatusOr<OptionValue> OptionValueFromJson(const nlohmann::json& j, std::string_view label,
                                          const OptionSpec* spec = nullptr);
nlohmann::json OptionValueToJson(const OptionValue& value);

// Options from a JSON object: starts from the defaults, sets each key through the schema
// (unknown keys are errors that suggest the closest name) and, for the box, Validate()s.
StatusOr<BoxOptions> BoxOptionsFromJson(const nlohmann::json& object);
StatusOr<ExecOptions> ExecOptionsFromJson(const nlohmann::json& object);

// Every option by its name, in its unit; FromJson(ToJson(o)) gives o back.
nlohmann::json BoxOptionsToJson(const BoxOptions& options);
nlohmann::json ExecOptionsToJson(const ExecOptions& options);

// The options a started box depends on (OptionSpec::shapes_box) as one canonical text: equal
// for options that start equal boxes. Spare jails are keyed on it.
std::string BoxShapeKey(const BoxOptions& options);

}  // namespace codebox::options

#endif  // CODEBOX_OPTIONS_OPTIONS_JSON_H_
