// How the schema reads and writes a field of BoxOptions or ExecOptions, by the field's C++
// type: one generic path, so that every option gets the same kind, bounds and null handling.
#ifndef CODEBOX_OPTIONS_OPTIONS_FIELDS_H_
#define CODEBOX_OPTIONS_OPTIONS_FIELDS_H_

#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "codebox/option_schema.h"
#include "net/egress_policy.h"

namespace codebox::options {

using Milliseconds = std::chrono::milliseconds;
using EnvMap = std::map<std::string, std::string>;

template <class S>
using Field = std::variant<std::string S::*, bool S::*, double S::*, uint64_t S::*, uint32_t S::*,
                           Milliseconds S::*, std::optional<Milliseconds> S::*, EnvMap S::*,
                           DriverKind S::*, std::optional<std::string> S::*, NetworkMode S::*,
                           std::vector<std::string> S::*, std::vector<Secret> S::*>;

template <class S>
struct Entry {
  OptionSpec spec;
  Field<S> field;
  Status (*check)(const std::string&) = nullptr;  // more checks of a string (or list entry)
};

// Conversions of a checked-kind value to each field type; errors are "<label>: <why>".
// `scale` is the alias's (value * scale is in the option's unit).
StatusOr<double> ToNumber(const OptionSpec& spec, const OptionValue& value, double scale,
                          std::string_view label);
StatusOr<Milliseconds> ToDuration(const OptionSpec& spec, const OptionValue& value, double scale,
                                  std::string_view label);
StatusOr<EnvMap> ToEnvironment(const OptionValue& value, std::string_view label);
StatusOr<std::string> ToString(const OptionSpec& spec, const OptionValue& value,
                               Status (*check)(const std::string&), std::string_view label);
// Each entry through `check`; at most kMaxListEntries of them.
inline constexpr size_t kMaxListEntries = 256;
StatusOr<std::vector<std::string>> ToList(const OptionValue& value,
                                          Status (*check)(const std::string&),
                                          std::string_view label);
OptionValue FromDuration(Milliseconds ms);  // seconds, or "none"

// A secret as one text, "NAME=VALUE@HOST[,HOST]" (the CLI's --secret, a JSON or Python string,
// the wire to a server): the name ends at the first '=', the hosts start after the last '@'.
// Errors name the secret (or its position) and never quote its value.
StatusOr<Secret> ParseSecretText(std::string_view text);
std::string SecretText(const Secret& secret);
Status CheckSecret(const Secret& secret);
// A list of such texts; at most kMaxSecrets, names unique.
StatusOr<std::vector<Secret>> ToSecrets(const OptionValue& value, std::string_view label);

template <class S>
const Entry<S>* FindEntry(const std::vector<Entry<S>>& entries, const OptionSpec* spec) {
  for (const Entry<S>& e : entries) {
    if (e.spec.name == spec->name) return &e;
  }
  return nullptr;
}

// Converts `value` into the field's type; null is the field's default (S{}'s), except for a
// duration that allows none, where it is none.
template <class S>
Status AssignField(const Entry<S>& e, S* options, const OptionValue& value, double scale,
                   std::string_view label) {
  return std::visit(
      [&](auto field) -> Status {
        using T = std::remove_cvref_t<decltype(options->*field)>;
        T& out = options->*field;
        // A box timeout has no fallback to be "the default" of: null is its "none".
        const bool null_is_none = std::is_same_v<T, Milliseconds> && e.spec.allows_none;
        if (value.is_null() && !null_is_none) {
          static const S kDefaults{};  // (a temporary S{} here trips GCC 12's maybe-uninitialized)
          out = kDefaults.*field;
          return Status::Ok();
        }
        if constexpr (std::is_same_v<T, bool>) {
          out = value.as_bool();
        } else if constexpr (std::is_same_v<T, double> || std::is_same_v<T, uint64_t> ||
                             std::is_same_v<T, uint32_t>) {
          ASSIGN_OR_RETURN(double v, ToNumber(e.spec, value, scale, label));
          out = static_cast<T>(v);
        } else if constexpr (std::is_same_v<T, Milliseconds> ||
                             std::is_same_v<T, std::optional<Milliseconds>>) {
          ASSIGN_OR_RETURN(out, ToDuration(e.spec, value, scale, label));
        } else if constexpr (std::is_same_v<T, EnvMap>) {
          ASSIGN_OR_RETURN(out, ToEnvironment(value, label));
        } else if constexpr (std::is_same_v<T, DriverKind>) {
          auto kind = ParseDriverKind(value.as_string());
          if (!kind.ok()) return kind.status().WithContext(label);
          out = *kind;
        } else if constexpr (std::is_same_v<T, NetworkMode>) {
          auto mode = net::ParseNetworkMode(value.as_string());
          if (!mode.ok()) return mode.status().WithContext(label);
          out = *mode;
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          ASSIGN_OR_RETURN(out, ToList(value, e.check, label));
        } else if constexpr (std::is_same_v<T, std::vector<Secret>>) {
          ASSIGN_OR_RETURN(out, ToSecrets(value, label));
        } else if constexpr (std::is_same_v<T, std::string> ||
                             std::is_same_v<T, std::optional<std::string>>) {
          ASSIGN_OR_RETURN(out, ToString(e.spec, value, e.check, label));
        }
        return Status::Ok();
      },
      e.field);
}

template <class S>
Status SetOption(const std::vector<Entry<S>>& entries, const OptionSchema& schema, S* options,
                 std::string_view name, const OptionValue& value, std::string_view label) {
  if (label.empty()) label = name;
  OptionMatch match = FindOption(schema, name);
  if (!match) return UnknownOptionError(schema, name);
  RETURN_IF_ERROR(CheckOptionKind(*match.spec, value, label));
  const Entry<S>* e = FindEntry(entries, match.spec);
  S changed = *options;
  RETURN_IF_ERROR(AssignField(*e, &changed, value, match.alias ? match.alias->scale : 1, label));
  *options = std::move(changed);
  return Status::Ok();
}

template <class S>
OptionValue GetOption(const std::vector<Entry<S>>& entries, const S& options,
                      std::string_view name) {
  for (const Entry<S>& e : entries) {
    if (e.spec.name != name) continue;
    return std::visit(
        [&](auto field) -> OptionValue {
          const auto& v = options.*field;
          using T = std::remove_cvref_t<decltype(v)>;
          if constexpr (std::is_same_v<T, Milliseconds>) {
            return FromDuration(v);
          } else if constexpr (std::is_same_v<T, std::optional<Milliseconds>>) {
            return v ? FromDuration(*v) : OptionValue();
          } else if constexpr (std::is_same_v<T, std::optional<std::string>>) {
            return v ? OptionValue(*v) : OptionValue();
          } else if constexpr (std::is_same_v<T, DriverKind>) {
            return OptionValue(DriverKindName(v));
          } else if constexpr (std::is_same_v<T, NetworkMode>) {
            return OptionValue(net::NetworkModeName(v));
          } else if constexpr (std::is_same_v<T, std::vector<Secret>>) {
            OptionValue::List texts;  // with the values: the caller's own, for the wire
            for (const Secret& secret : v) texts.push_back(SecretText(secret));
            return OptionValue(std::move(texts));
          } else {
            return OptionValue(v);
          }
        },
        e.field);
  }
  return OptionValue();
}

}  // namespace codebox::options

#endif  // CODEBOX_OPTIONS_OPTIONS_FIELDS_H_
