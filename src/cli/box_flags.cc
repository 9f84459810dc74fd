#include "cli/box_flags.h"

#include <cstdio>
#include <cstdlib>

#include "base/io.h"
#include "base/json.h"
#include "base/text.h"
#include "codebox/option_schema.h"
#include "options/options_fields.h"

namespace codebox::cli {

namespace {

// --secret-file FILE: one NAME=VALUE@HOST[,HOST] a line ('#' lines and blank ones skipped), so
// that no value is on a command line (ps shows those). Errors say the line, never its text.
Status AddSecretFile(const std::string& path, BoxOptions* options) {
  constexpr size_t kMaxBytes = 256 << 10;
  auto text = base::ReadFile(path);
  if (!text.ok()) return text.status().WithContext("--secret-file");
  if (text->size() > kMaxBytes) {
    return InvalidArgument("--secret-file " + base::Excerpt(path) + ": more than 256 KiB");
  }
  OptionValue::List items = GetBoxOption(*options, "secrets").as_list();
  size_t line_number = 0;
  for (std::string_view rest = *text; !rest.empty();) {
    const size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    auto secret = options::ParseSecretText(line);
    if (!secret.ok()) {
      return secret.status().WithContext("--secret-file " + base::Excerpt(path) + " line " +
                                         std::to_string(line_number));
    }
    items.emplace_back(line);
  }
  return SetBoxOption(options, "secrets", OptionValue(std::move(items)), "--secret-file");
}

}  // namespace

StatusOr<bool> ParseBoxFlag(const std::vector<std::string>& args, size_t* i, BoxOptions* options) {
  const std::string& arg = args[*i];
  if (arg.rfind("--", 0) != 0) return false;
  const size_t eq = arg.find('=');
  const std::string flag = arg.substr(0, eq);
  if (flag == "--secret-file") {
    if (eq == std::string::npos && *i + 1 >= args.size())
      return InvalidArgument(flag + " needs a file");
    RETURN_IF_ERROR(
        AddSecretFile(eq != std::string::npos ? arg.substr(eq + 1) : args[++*i], options));
    return true;
  }
  OptionMatch match = FindOption(BoxOptionSchema(), flag);
  if (!match) return false;
  std::string text;
  if (eq != std::string::npos) {
    text = arg.substr(eq + 1);
  } else if (match.spec->type == OptionType::kBool) {
    text = "true";
  } else if (*i + 1 < args.size()) {
    text = args[++*i];
  } else {
    return InvalidArgument(flag + " needs a value");
  }
  auto value = ParseOptionText(*match.spec, match.alias, text);
  if (!value.ok()) return value.status().WithContext(flag);
  if (match.spec->type == OptionType::kEnvironment) {  // repeatable: adds to what is there
    const OptionValue current = GetBoxOption(*options, match.spec->name);
    const auto& [name, text_value] = value->as_environment().at(0);
    OptionValue::Environment env;
    for (const auto& kv : current.as_environment()) {
      if (kv.first != name) env.push_back(kv);
    }
    env.emplace_back(name, text_value);
    *value = OptionValue(std::move(env));
  } else if (match.spec->type == OptionType::kList) {  // repeatable: one entry per flag
    OptionValue::List items = GetBoxOption(*options, match.spec->name).as_list();
    items.push_back(value->as_list().at(0));
    *value = OptionValue(std::move(items));
  }
  RETURN_IF_ERROR(SetBoxOption(options, flag, *value, flag));
  return true;
}

Status ValidateForCli(const BoxOptions& options) {
  return ValidateBoxOptions(options, [](const OptionSpec& spec) { return spec.Flag(); });
}

std::string BoxFlagHint(const std::string& flag) {
  std::string_view closest = ClosestOptionName(BoxOptionSchema(), flag);
  return closest.empty() ? "" : "; did you mean " + OptionSpec::FlagOf(closest) + "?";
}

std::vector<std::string> BoxFlagNames() {
  std::vector<std::string> names;
  for (const OptionSpec& spec : BoxOptionSchema()) {
    names.push_back(spec.Flag());
    names.push_back(OptionSpec::FlagOf(spec.name));
    for (const OptionAlias& alias : spec.aliases) names.push_back(OptionSpec::FlagOf(alias.name));
  }
  return names;
}

void PrintError(const std::string& command, const Status& status) {
  // Error texts may quote the box (names, agent messages, the guest console).
  std::string message = base::TerminalSafe(status.message());
  std::fprintf(stderr, "codebox %s: %s\n", command.c_str(), message.c_str());
}

}  // namespace codebox::cli
