// Values of options: lookup by name or alias, kinds, bounds and conversions shared by every
// option of the schema.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "base/json.h"
#include "base/text.h"
#include "codebox/option_schema.h"
#include "options/options_fields.h"

namespace codebox {
namespace {

std::string Normalized(std::string_view name) {
  if (name.substr(0, 2) == "--") name.remove_prefix(2);
  std::string out(name);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

std::string FormatNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

std::string WithUnit(double v, std::string_view unit) {
  return FormatNumber(v) + (unit.empty() ? "" : " " + std::string(unit));
}

std::string Describe(const OptionValue& value) {
  if (value.kind() == OptionValue::Kind::kString) return "'" + value.as_string() + "'";
  return FormatOptionValue(value);
}

Status Bad(std::string_view label, const std::string& why) {
  return InvalidArgument(std::string(label) + ": " + why);
}

}  // namespace

double OptionValue::as_number() const {
  return kind() == Kind::kInteger ? static_cast<double>(as_integer()) : std::get<double>(v_);
}

std::string_view OptionValue::KindName(Kind kind) {
  switch (kind) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return "bool";
    case Kind::kInteger:
      return "integer";
    case Kind::kNumber:
      return "number";
    case Kind::kString:
      return "string";
    case Kind::kEnvironment:
      return "environment";
    case Kind::kList:
      return "list";
  }
  return "unknown";
}

std::string_view OptionTypeName(OptionType type) {
  switch (type) {
    case OptionType::kBool:
      return "bool";
    case OptionType::kInteger:
      return "integer";
    case OptionType::kNumber:
      return "number";
    case OptionType::kSize:
      return "size";
    case OptionType::kDuration:
      return "duration";
    case OptionType::kString:
      return "string";
    case OptionType::kChoice:
      return "choice";
    case OptionType::kEnvironment:
      return "environment";
    case OptionType::kData:
      return "data";
    case OptionType::kList:
      return "list";
  }
  return "unknown";
}

std::string OptionSpec::FlagOf(std::string_view name) {
  std::string flag = "--" + std::string(name);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

std::string OptionSpec::Flag() const { return FlagOf(flag_name.empty() ? name : flag_name); }

OptionMatch FindOption(const OptionSchema& schema, std::string_view name) {
  std::string wanted = Normalized(name);
  for (const OptionSpec& spec : schema) {
    if (spec.name == wanted) return {&spec, nullptr};
    for (const OptionAlias& alias : spec.aliases) {
      if (alias.name == wanted) return {&spec, &alias};
    }
  }
  return {};
}

std::string_view ClosestOptionName(const OptionSchema& schema, std::string_view name) {
  std::vector<std::string_view> names;
  for (const OptionSpec& spec : schema) {
    names.push_back(spec.name);
    for (const OptionAlias& alias : spec.aliases) names.push_back(alias.name);
  }
  return base::ClosestWord(Normalized(name), names);
}

Status UnknownOptionError(const OptionSchema& schema, std::string_view name,
                          std::string_view what) {
  const bool as_flag = name.substr(0, 2) == "--";
  auto shown = [&](std::string_view n) {
    // The name may be a client's, of any length: echoed short.
    return as_flag ? base::Excerpt(OptionSpec::FlagOf(Normalized(n)))
                   : "'" + base::Excerpt(n) + "'";
  };
  std::string message = "unknown " + std::string(what) + " " + shown(name);
  std::string_view best = ClosestOptionName(schema, name);
  if (!best.empty()) return InvalidArgument(message + "; did you mean " + shown(best) + "?");
  std::string all;
  for (const OptionSpec& spec : schema) {
    all += (all.empty() ? "" : ", ") + (as_flag ? spec.Flag() : std::string(spec.name));
  }
  return InvalidArgument(message + "; valid: " + all);
}

Status CheckOptionKind(const OptionSpec& spec, const OptionValue& value, std::string_view label) {
  using K = OptionValue::Kind;
  const K kind = value.kind();
  bool ok = kind == K::kNull;
  std::string wants;
  switch (spec.type) {
    case OptionType::kBool:
      ok = ok || kind == K::kBool;
      wants = "true or false";
      break;
    case OptionType::kInteger:
    case OptionType::kSize:
    case OptionType::kNumber:
      ok = ok || kind == K::kInteger || kind == K::kNumber;
      wants = "a number" + (spec.unit.empty() ? "" : " of " + std::string(spec.unit));
      break;
    case OptionType::kDuration:
      ok = ok || kind == K::kInteger || kind == K::kNumber ||
           (spec.allows_none && kind == K::kString);
      wants = std::string("a number of seconds") + (spec.allows_none ? " or none" : "");
      break;
    case OptionType::kString:
    case OptionType::kChoice:
    case OptionType::kData:
      ok = ok || kind == K::kString;
      wants = spec.type == OptionType::kData ? "text or bytes" : "a string";
      break;
    case OptionType::kEnvironment:
      ok = ok || kind == K::kEnvironment;
      wants = "a mapping of variable names to strings, or a list of (name, value) pairs";
      break;
    case OptionType::kList:
      ok = ok || kind == K::kList;
      wants = "a list of strings";
      break;
  }
  if (ok) return Status::Ok();
  // A secret's value never goes into an error: only the kind that was given.
  return Bad(label, "must be " + wants + ", got " + std::string(OptionValue::KindName(kind)) +
                        (spec.name == "secrets" ? "" : " " + Describe(value)));
}

std::string FormatOptionValue(const OptionValue& value) {
  using K = OptionValue::Kind;
  switch (value.kind()) {
    case K::kNull:
      return "null";
    case K::kBool:
      return value.as_bool() ? "true" : "false";
    case K::kInteger:
      return std::to_string(value.as_integer());
    case K::kNumber:
      return FormatNumber(value.as_number());
    case K::kString:
      return value.as_string().empty() ? "\"\"" : value.as_string();
    case K::kEnvironment: {
      std::string out;
      for (const auto& [k, v] : value.as_environment())
        out += (out.empty() ? "" : ", ") + k + "=" + v;
      return "{" + out + "}";
    }
    case K::kList: {
      std::string out;
      for (const std::string& item : value.as_list()) out += (out.empty() ? "" : ", ") + item;
      return "[" + out + "]";
    }
  }
  return "";
}

namespace options {

StatusOr<double> ToNumber(const OptionSpec& spec, const OptionValue& value, double scale,
                          std::string_view label) {
  const double v = value.as_number() * scale;
  if (std::isnan(v)) return Bad(label, "must be a number, got nan");
  const bool whole = spec.type == OptionType::kInteger || spec.type == OptionType::kSize;
  if (whole && std::isfinite(v) && v != std::floor(v)) {
    return Bad(label, "must be a whole number" +
                          (spec.unit.empty() ? "" : " of " + std::string(spec.unit)) + ", got " +
                          FormatNumber(v));
  }
  if (spec.has_bounds) {
    if (spec.min_exclusive ? !(v > spec.min) : !(v >= spec.min)) {
      return Bad(label,
                 std::string(spec.min_exclusive ? "must be more than " : "must be at least ") +
                     WithUnit(spec.min, spec.unit) + ", got " + WithUnit(v, spec.unit));
    }
    if (!(v <= spec.max)) {
      return Bad(label, "must be at most " + WithUnit(spec.max, spec.unit) + ", got " +
                            WithUnit(v, spec.unit));
    }
  }
  return v;
}

StatusOr<Milliseconds> ToDuration(const OptionSpec& spec, const OptionValue& value, double scale,
                                  std::string_view label) {
  const bool none = value.is_null() ||
                    (value.kind() == OptionValue::Kind::kString && value.as_string() == "none") ||
                    (value.kind() != OptionValue::Kind::kString && value.as_number() == INFINITY);
  if (none && spec.allows_none) return kNoTimeout;
  if (value.kind() == OptionValue::Kind::kString) {
    return Bad(label, "must be a number of seconds or none, got '" + value.as_string() + "'");
  }
  const double seconds = value.is_null() ? 0 : value.as_number() * scale;
  // Under 1 ms would round to 0, which must never read as "no limit".
  if (!(seconds >= spec.min)) {
    // Both units in the words: C++ callers think in ms, Python and JSON ones in seconds.
    return Bad(label, "must be at least 1 ms (at least " + FormatNumber(spec.min) + " s), got " +
                          FormatNumber(seconds) + " s" +
                          (spec.allows_none ? "; for no limit ask for none explicitly (none, "
                                              "None, kNoTimeout)"
                                            : ""));
  }
  if (!(seconds <= spec.max)) {
    return Bad(label, "must be at most " + FormatNumber(spec.max) + " s, got " +
                          FormatNumber(seconds) + (spec.allows_none ? " (or none)" : ""));
  }
  return Milliseconds(std::llround(seconds * 1000.0));
}

StatusOr<EnvMap> ToEnvironment(const OptionValue& value, std::string_view label) {
  EnvMap env;
  for (const auto& [k, v] : value.as_environment()) {
    if (!env.emplace(k, v).second)
      return Bad(label, "variable " + base::Excerpt(k) + " is given twice");
  }
  Status st = ValidateEnvironment(env);
  if (!st.ok()) return st.WithContext(label);
  return env;
}

StatusOr<std::string> ToString(const OptionSpec& spec, const OptionValue& value,
                               Status (*check)(const std::string&), std::string_view label) {
  const std::string& s = value.as_string();
  if (spec.type != OptionType::kData && s.find('\0') != std::string::npos) {
    return Bad(label, "must not contain a NUL byte");
  }
  if (check != nullptr) {
    Status st = check(s);
    if (!st.ok()) return st.WithContext(label);
  }
  return s;
}

StatusOr<std::vector<std::string>> ToList(const OptionValue& value,
                                          Status (*check)(const std::string&),
                                          std::string_view label) {
  const OptionValue::List& items = value.as_list();
  if (items.size() > kMaxListEntries) {
    return Bad(label, "must have at most " + std::to_string(kMaxListEntries) + " entries, got " +
                          std::to_string(items.size()));
  }
  for (const std::string& item : items) {
    if (item.find('\0') != std::string::npos) return Bad(label, "an entry has a NUL byte");
    if (check != nullptr) {
      Status st = check(item);
      if (!st.ok()) return st.WithContext(label);
    }
  }
  return items;
}

namespace {

bool IsSecretName(std::string_view name) {
  if (name.empty() || name.size() > 64 || std::isdigit(static_cast<unsigned char>(name[0]))) {
    return false;
  }
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace

Status CheckSecret(const Secret& secret) {
  if (!IsSecretName(secret.name)) {
    return InvalidArgument(
        "a secret's name must be letters, digits and '_' (not first a digit; "
        "at most 64), as an environment variable's, got '" +
        base::Excerpt(secret.name, 64) + "'");
  }
  const std::string who = "secret " + secret.name + ": ";
  if (secret.value.empty() || secret.value.size() > 4096) {
    return InvalidArgument(who + "its value must have 1 to 4096 bytes, got " +
                           std::to_string(secret.value.size()));
  }
  if (secret.value.find_first_of(std::string_view("\0\r\n", 3)) != std::string::npos) {
    return InvalidArgument(who +
                           "its value has a NUL, CR or LF byte, which no HTTP header can "
                           "carry");
  }
  if (secret.value.find(kSecretPlaceholderPrefix) != std::string::npos) {
    return InvalidArgument(who + "its value holds a placeholder (" +
                           std::string(kSecretPlaceholderPrefix) + "...)");
  }
  if (secret.hosts.empty() || secret.hosts.size() > 16) {
    return InvalidArgument(who +
                           "give 1 to 16 hosts it may be sent to (allow_hosts' syntax), "
                           "got " +
                           std::to_string(secret.hosts.size()));
  }
  for (const std::string& host : secret.hosts) {
    auto pattern = net::ParseHostPattern(host);
    if (!pattern.ok()) return pattern.status().WithContext("secret " + secret.name);
  }
  return Status::Ok();
}

StatusOr<Secret> ParseSecretText(std::string_view text) {
  const size_t eq = text.find('=');
  const size_t at = text.rfind('@');
  if (eq == std::string_view::npos || at == std::string_view::npos || at < eq) {
    // The name, if one can be told, but nothing after it: that may be the value.
    return InvalidArgument(
        "a secret is NAME=VALUE@HOST[,HOST] (the hosts it may be sent to after the last '@')" +
        std::string(eq != std::string_view::npos && IsSecretName(text.substr(0, eq))
                        ? ", got one named " + std::string(text.substr(0, eq))
                        : ""));
  }
  Secret secret{.name = std::string(text.substr(0, eq)),
                .value = std::string(text.substr(eq + 1, at - eq - 1))};
  std::string_view hosts = text.substr(at + 1);
  while (!hosts.empty() || secret.hosts.empty()) {
    const size_t comma = hosts.find(',');
    std::string_view host = hosts.substr(0, comma);
    while (!host.empty() && host.front() == ' ') host.remove_prefix(1);
    while (!host.empty() && host.back() == ' ') host.remove_suffix(1);
    secret.hosts.emplace_back(host);
    if (comma == std::string_view::npos) break;
    hosts.remove_prefix(comma + 1);
  }
  RETURN_IF_ERROR(CheckSecret(secret));
  return secret;
}

std::string SecretText(const Secret& secret) {
  std::string hosts;
  for (const std::string& host : secret.hosts) hosts += (hosts.empty() ? "" : ",") + host;
  return secret.name + "=" + secret.value + "@" + hosts;
}

}  // namespace options

StatusOr<std::string> SecretOptionText(const Secret& secret) {
  RETURN_IF_ERROR(options::CheckSecret(secret));
  return options::SecretText(secret);
}

namespace options {

StatusOr<std::vector<Secret>> ToSecrets(const OptionValue& value, std::string_view label) {
  const OptionValue::List& items = value.as_list();
  if (items.size() > kMaxSecrets) {
    return Bad(label, "must have at most " + std::to_string(kMaxSecrets) + " secrets, got " +
                          std::to_string(items.size()));
  }
  std::vector<Secret> out;
  for (size_t i = 0; i < items.size(); ++i) {
    auto secret = ParseSecretText(items[i]);
    if (!secret.ok()) {
      return secret.status().WithContext(std::string(label) + " #" + std::to_string(i + 1));
    }
    for (const Secret& earlier : out) {
      if (earlier.name == secret->name) return Bad(label, "two secrets named " + secret->name);
    }
    out.push_back(std::move(*secret));
  }
  return out;
}

OptionValue FromDuration(Milliseconds ms) {
  if (ms == kNoTimeout) return OptionValue("none");
  return OptionValue(static_cast<double>(ms.count()) / 1000.0);
}

}  // namespace options
}  // namespace codebox
