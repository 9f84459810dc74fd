// The schema of BoxOptions and ExecOptions: one entry per option with its name, type, unit,
// bounds, help and aliases. BoxOptions::Validate, the CLI flags and their --help, the Python
// keyword arguments, the JSON form and docs/options.md are all driven by it, so an option is
// described once (src/box/option_schema.cc) and every front end agrees.
//
//   BoxOptions o;
//   Status st = SetBoxOption(&o, "memory_mib", OptionValue(1024));   // or "memory", "--memory"
//   st = SetBoxOption(&o, "pids", OptionValue(0));  // "pids: must be at least 1, got 0"
//
// BoxOptions stays the plain struct C++ users fill in; the schema only reads and writes it.
#ifndef CODEBOX_OPTION_SCHEMA_H_
#define CODEBOX_OPTION_SCHEMA_H_

#include <concepts>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox {

enum class OptionType {
  kBool,      // true or false; a CLI flag without a value sets it
  kInteger,   // a whole number of `unit`
  kNumber,    // a real number
  kSize,      // a whole number of `unit` (MiB or bytes); on the CLI also 512K, 512M, 2G
  kDuration,  // seconds (CLI also 500ms, 2m); "none" = no limit where allows_none
  kString,
  kChoice,       // one of `choices`
  kEnvironment,  // NAME=value pairs: a mapping or a list of pairs; CLI --env K=V, repeatable
  kData,         // bytes (an exec's stdin)
  kList,         // strings: a list in Python and JSON; on the CLI the flag repeated, one each
};
std::string_view OptionTypeName(OptionType type);  // "bool", "integer", "size", ...

// Another accepted spelling of an option, as a Python keyword or JSON key (underscores) and as
// a CLI flag (--dashes). A value given through an alias with a scale is in the alias's unit:
// disk_size_gb=2 is disk_mib=2048.
struct OptionAlias {
  std::string_view name = {};
  double scale = 1;
  std::string_view unit = {};  // the alias's own unit, when it has a scale
};

struct OptionSpec {
  std::string_view name = {};  // the C++ field, Python keyword and JSON key: "memory_mib"
  OptionType type = OptionType::kString;
  std::string_view unit = {};  // "MiB", "bytes", "s", or empty
  std::string_view help = {};
  std::vector<OptionAlias> aliases = {};
  std::vector<std::string_view> choices = {};  // kChoice
  // Bounds in `unit` (kInteger, kSize, kNumber, kDuration); none when has_bounds is false.
  bool has_bounds = false;
  double min = 0;
  bool min_exclusive = false;  // (min, max] instead of [min, max]
  double max = 0;
  // kDuration: "none" (null, +inf) is an explicit "no limit".
  bool allows_none = false;
  // What --help shows after the flag ("NAME", "DIR"); empty: from the type.
  std::string_view value_name = {};
  // The CLI flag's name when it is not the option's (it must also be an alias): a list given
  // one entry per flag reads better singular (allow_hosts: --allow-host HOST, repeated).
  std::string_view flag_name = {};
  // The started box depends on it (spare jails are keyed on these); false for what Box
  // applies per exec or only uses to choose a driver.
  bool shapes_box = true;

  // "--memory-mib": the CLI flag of the name (or of flag_name).
  std::string Flag() const;
  static std::string FlagOf(std::string_view name);  // "disk_size_gb" -> "--disk-size-gb"
};

using OptionSchema = std::vector<OptionSpec>;
const OptionSchema& BoxOptionSchema();
const OptionSchema& ExecOptionSchema();

// A value on its way into (or out of) an option, independent of where it came from (Python,
// JSON, CLI text). Null means "the default", except where the option documents otherwise.
class OptionValue {
 public:
  enum class Kind { kNull, kBool, kInteger, kNumber, kString, kEnvironment, kList };
  using Environment = std::vector<std::pair<std::string, std::string>>;
  using List = std::vector<std::string>;

  OptionValue() = default;
  OptionValue(bool v) : v_(v) {}
  template <std::integral T>
  requires(!std::same_as<T, bool>) OptionValue(T v) : v_(ClampToInt64(v)) {}
  OptionValue(double v) : v_(v) {}
  OptionValue(std::string v) : v_(std::move(v)) {}
  OptionValue(std::string_view v) : v_(std::string(v)) {}
  OptionValue(const char* v) : v_(std::string(v)) {}
  OptionValue(Environment v) : v_(std::move(v)) {}
  OptionValue(const std::map<std::string, std::string>& env)
      : v_(Environment(env.begin(), env.end())) {}
  OptionValue(List v) : v_(std::move(v)) {}

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_null() const { return kind() == Kind::kNull; }
  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_integer() const { return std::get<int64_t>(v_); }
  double as_number() const;  // an integer or a number
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const Environment& as_environment() const { return std::get<Environment>(v_); }
  const List& as_list() const { return std::get<List>(v_); }
  bool operator==(const OptionValue&) const = default;

  static std::string_view KindName(Kind kind);  // "null", "bool", "integer", ...

 private:
  template <class T>
  static int64_t ClampToInt64(T v) {
    if constexpr (std::unsigned_integral<T>) {
      return v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v);
    } else {
      return static_cast<int64_t>(v);
    }
  }
  std::variant<std::monostate, bool, int64_t, double, std::string, Environment, List> v_;
};

// An option by its name or one of its aliases, with underscores or dashes, with or without a
// leading "--". `alias` is null when it was found by its name.
struct OptionMatch {
  const OptionSpec* spec = nullptr;
  const OptionAlias* alias = nullptr;
  explicit operator bool() const { return spec != nullptr; }
};
OptionMatch FindOption(const OptionSchema& schema, std::string_view name);

// The name or alias closest to `name` (a few typing slips away), or empty when none is.
std::string_view ClosestOptionName(const OptionSchema& schema, std::string_view name);

// "unknown option 'memroy_mib'; did you mean 'memory_mib'?" (kInvalidArgument), naming the
// closest name or alias when there is a close one. `what` is "option" or "flag" and so on.
Status UnknownOptionError(const OptionSchema& schema, std::string_view name,
                          std::string_view what = "option");

// Whether `value` has a kind `spec` takes (null always does); the error names `label` and
// what the option takes. SetBoxOption checks it first; callers that report a wrong type apart
// from a bad value (Python: TypeError vs ValueError) call it themselves.
Status CheckOptionKind(const OptionSpec& spec, const OptionValue& value, std::string_view label);

// Sets one option by name or alias, checked: the value's kind, its bounds, and what
// Validate() checks for that option. Errors start with `label` (default: the name as given),
// so a CLI can name the flag the user typed. Null sets the default (for the box's timeouts:
// no limit). *options is unchanged on error.
Status SetBoxOption(BoxOptions* options, std::string_view name, const OptionValue& value,
                    std::string_view label = {});
Status SetExecOption(ExecOptions* options, std::string_view name, const OptionValue& value,
                     std::string_view label = {});

// How an error names an option: BoxOptions::Validate names the field (also the Python keyword
// and JSON key), the CLI its flag (OptionSpec::Flag).
using OptionLabeler = std::string (*)(const OptionSpec& spec);
// BoxOptions::Validate with errors that name each option as `label_of` says, the options a
// check combines included ("--allow-host: given with --network open, ...").
Status ValidateBoxOptions(const BoxOptions& options, OptionLabeler label_of);

// A secret as the `secrets` option takes it ("NAME=VALUE@HOST[,HOST]"), checked first: for
// faces that take secrets as objects (JSON, Python). Errors name the secret, never its value.
StatusOr<std::string> SecretOptionText(const Secret& secret);

// The value of one option (by its name), in its unit: sizes as integers, durations as
// seconds, "none" for no limit, null for an unset optional, the driver by name.
OptionValue GetBoxOption(const BoxOptions& options, std::string_view name);
OptionValue GetExecOption(const ExecOptions& options, std::string_view name);

// A value as text for help and docs: "512", "30", "none", "auto", "{}" for an empty
// environment, "[]" for an empty list, "\"\"" for an empty string.
std::string FormatOptionValue(const OptionValue& value);

}  // namespace codebox

#endif  // CODEBOX_OPTION_SCHEMA_H_
