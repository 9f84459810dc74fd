// Text about options, generated from the schema: the box flags' --help and docs/options.md.
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

#include "cli/box_flags.h"
#include "cli/help_text.h"
#include "codebox/option_schema.h"

namespace codebox::cli {
namespace {

std::string Number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

std::string ValueName(const OptionSpec& spec) {
  if (!spec.value_name.empty()) return std::string(spec.value_name);
  switch (spec.type) {
    case OptionType::kBool:
      return "";
    case OptionType::kInteger:
    case OptionType::kNumber:
      return "N";
    case OptionType::kSize:
      return "SIZE";
    case OptionType::kDuration:
      return "T";
    case OptionType::kEnvironment:
      return "K=V";
    case OptionType::kList:
      return "VALUE";
    case OptionType::kChoice: {
      std::string out;
      for (std::string_view c : spec.choices) out += (out.empty() ? "" : "|") + std::string(c);
      return out;
    }
    case OptionType::kString:
    case OptionType::kData:
      return "TEXT";
  }
  return "VALUE";
}

// "32 to 1048576", "more than 0, at most 256", with "or none" for durations that allow it.
std::string Bounds(const OptionSpec& spec) {
  if (!spec.has_bounds) return "";
  std::string out = spec.min_exclusive
                        ? "more than " + Number(spec.min) + ", at most " + Number(spec.max)
                        : Number(spec.min) + " to " + Number(spec.max);
  return spec.allows_none ? out + ", or none" : out;
}

std::string DefaultOf(const OptionSchema& schema, const OptionSpec& spec) {
  if (&schema == &BoxOptionSchema())
    return FormatOptionValue(GetBoxOption(BoxOptions{}, spec.name));
  return FormatOptionValue(GetExecOption(ExecOptions{}, spec.name));
}

// The flags besides spec.Flag(): the name's (when flag_name differs) and each alias's.
std::vector<std::string> OtherFlags(const OptionSpec& spec) {
  std::vector<std::string> flags;
  if (OptionSpec::FlagOf(spec.name) != spec.Flag()) flags.push_back(OptionSpec::FlagOf(spec.name));
  for (const OptionAlias& alias : spec.aliases) {
    if (OptionSpec::FlagOf(alias.name) != spec.Flag())
      flags.push_back(OptionSpec::FlagOf(alias.name));
  }
  return flags;
}

// Joins words that must stay on one line ("(default 512)").
constexpr char kGlue = '\x01';

void Wrapped(std::string* out, const std::string& text, size_t indent, size_t width) {
  std::istringstream words(text);
  std::string word;
  size_t column = indent;
  bool first = true;
  while (words >> word) {
    if (!first && column + 1 + word.size() > width) {
      *out += "\n" + std::string(indent, ' ');
      column = indent;
      first = true;
    }
    if (!first) *out += ' ', ++column;
    std::replace(word.begin(), word.end(), kGlue, ' ');
    *out += word;
    column += word.size();
    first = false;
  }
  *out += '\n';
}

// Text for a Markdown table cell: a '|' would end the cell.
std::string Cell(std::string text) {
  for (size_t p = 0; (p = text.find('|', p)) != std::string::npos; p += 2)
    text.replace(p, 1, "\\|");
  return text;
}

}  // namespace

std::string BoxFlagsHelp() {
  constexpr size_t kIndent = 23;
  std::string out =
      "box options (--flag VALUE or --flag=VALUE; a SIZE may end in K, M or G; a time\n"
      "T is seconds, or 500ms, 2m, or none for no limit; see docs/options.md):\n";
  for (const OptionSpec& spec : BoxOptionSchema()) {
    std::string flags = "  " + spec.Flag();
    for (const std::string& other : OtherFlags(spec)) flags += ", " + other;
    std::string value = ValueName(spec);
    if (!value.empty()) flags += " " + value;
    out += flags;
    if (flags.size() + 1 > kIndent) {
      out += "\n" + std::string(kIndent, ' ');
    } else {
      out += std::string(kIndent - flags.size(), ' ');
    }
    std::string text(spec.help);
    std::string details;
    if (spec.type == OptionType::kDuration) {
      details += "seconds";
    } else if (!spec.unit.empty()) {
      details += "in " + std::string(spec.unit);
    }
    for (const OptionAlias& alias : spec.aliases) {
      if (alias.scale != 1)
        details += ", " + OptionSpec::FlagOf(alias.name) + " in " + std::string(alias.unit);
    }
    if (spec.has_bounds) details += (details.empty() ? "" : ", ") + Bounds(spec);
    if (spec.type == OptionType::kEnvironment) details += "repeatable";
    if (spec.type == OptionType::kList) {
      details += (details.empty() ? "" : ", ") + std::string("repeatable, one each");
    }
    if (!details.empty()) text += "; " + details;
    text += " (default" + std::string(1, kGlue) + DefaultOf(BoxOptionSchema(), spec) + ")";
    Wrapped(&out, text, kIndent, kHelpWidth);
    if (spec.name == "secrets") {  // the form that keeps values off the command line
      out += "  --secret-file FILE";
      out += std::string(kIndent - 20, ' ');
      Wrapped(&out,
              "secrets from FILE, one NAME=VALUE@HOST[,HOST] a line (# comments); no value "
              "shows in ps",
              kIndent, kHelpWidth);
    }
  }
  return out;
}

std::string OptionsMarkdown() {
  std::string out =
      "# codebox options\n\n"
      "<!-- Generated from the option schema (src/box/options_schema.cc) by `codebox options\n"
      "--markdown`; a test fails when this file differs. Edit the schema, not this file. -->\n\n"
      "Every option of a box and of one exec, as the C++ struct fields (`BoxOptions`,\n"
      "`ExecOptions`), Python keyword arguments (`CodeBox(...)`, `box.exec(...)`) and JSON keys\n"
      "take them. Aliases are accepted wherever the name is; an alias with its own unit takes\n"
      "values in that unit. `null` (Python `None`) is the default, except for the box's\n"
      "timeouts, where it means no limit. Sizes and durations are numbers in the unit shown; on\n"
      "the command line a size may end in K, M or G, and a duration is seconds or 500ms, 2m or\n"
      "none.\n";
  auto table = [&](const char* title, const OptionSchema& schema, bool cli) {
    out += std::string("\n## ") + title + "\n\n";
    out += "| name | aliases | type | unit | default | bounds | CLI flag | help |\n";
    out += "|---|---|---|---|---|---|---|---|\n";
    for (const OptionSpec& spec : schema) {
      std::string aliases, flags;
      if (cli) flags = "`" + spec.Flag() + "`";
      for (const OptionAlias& alias : spec.aliases) {
        aliases += (aliases.empty() ? "`" : ", `") + std::string(alias.name) + "`";
        if (alias.scale != 1) aliases += " (" + std::string(alias.unit) + ")";
      }
      if (cli) {
        for (const std::string& other : OtherFlags(spec)) flags += ", `" + other + "`";
      }
      std::string type(OptionTypeName(spec.type));
      if (spec.type == OptionType::kChoice) type += ": " + ValueName(spec);
      out += "| `" + std::string(spec.name) + "` | " + aliases + " | " + Cell(type) + " | " +
             std::string(spec.unit) + " | `" + DefaultOf(schema, spec) + "` | " + Bounds(spec) +
             " | " + (cli ? flags : "-") + " | " + Cell(std::string(spec.help)) + " |\n";
    }
  };
  table("Box options (BoxOptions, CodeBox(...), codebox run/exec/ask/repl flags)",
        BoxOptionSchema(), true);
  table("Exec options (ExecOptions, box.exec(...))", ExecOptionSchema(), false);
  return out;
}

}  // namespace codebox::cli
