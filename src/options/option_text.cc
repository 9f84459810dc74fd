#include "options/option_text.h"

#include <cctype>
#include <cstdlib>

namespace codebox::options {

static StatusOr<double> ParseNumber(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end == nullptr || *end != '\0' || !(v >= 0)) {
    return InvalidArgument("'" + text + "' is not a non-negative number");
  }
  return v;
}

// "512" (in unit_bytes), "512K", "512M", "2G" -> a count of unit_bytes.
static StatusOr<double> ParseSize(const std::string& text, double unit_bytes) {
  std::string number = text;
  double bytes_per = unit_bytes;
  if (!number.empty()) {
    char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(number.back())));
    if (unit == 'K' || unit == 'M' || unit == 'G') {
      number.pop_back();
      bytes_per = unit == 'G' ? 1 << 30 : unit == 'M' ? 1 << 20 : 1 << 10;
    }
  }
  auto v = ParseNumber(number);
  if (!v.ok()) return InvalidArgument("'" + text + "' is not a size (e.g. 512, 512M, 2G)");
  return *v * bytes_per / unit_bytes;
}

StatusOr<uint64_t> ParseMebibytes(const std::string& text) {
  ASSIGN_OR_RETURN(double mib, ParseSize(text, 1 << 20));
  return static_cast<uint64_t>(mib);
}

StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& text) {
  std::string number = text;
  double scale = 1000;
  if (number.size() > 2 && number.substr(number.size() - 2) == "ms") {
    number.resize(number.size() - 2);
    scale = 1;
  } else if (!number.empty() && (number.back() == 's' || number.back() == 'm')) {
    scale = number.back() == 'm' ? 60'000 : 1000;
    number.pop_back();
  }
  auto v = ParseNumber(number);
  if (!v.ok()) return InvalidArgument("'" + text + "' is not a duration (e.g. 30, 1.5, 500ms, 2m)");
  // Below 1 ms it would truncate to 0, which must never read as "no limit".
  if (*v * scale < 1) {
    return InvalidArgument("'" + text + "' is under 1 ms; a duration is at least 1ms");
  }
  if (*v * scale > 1e12) return InvalidArgument("'" + text + "' is too long a duration");
  return std::chrono::milliseconds(static_cast<int64_t>(*v * scale));
}

StatusOr<std::chrono::milliseconds> ParseTimeout(const std::string& text) {
  if (text == "none") return kNoTimeout;
  auto d = ParseDuration(text);
  if (!d.ok()) return InvalidArgument(d.status().message() + " (or none for no limit)");
  return d;
}

static double BytesPerUnit(std::string_view unit) {
  if (unit == "GiB") return 1 << 30;
  if (unit == "MiB") return 1 << 20;
  return 1;
}

StatusOr<OptionValue> ParseOptionText(const OptionSpec& spec, const OptionAlias* alias,
                                      const std::string& text) {
  switch (spec.type) {
    case OptionType::kBool:
      if (text == "true" || text == "yes" || text == "1") return OptionValue(true);
      if (text == "false" || text == "no" || text == "0") return OptionValue(false);
      return InvalidArgument("wants true or false, got '" + text + "'");
    case OptionType::kInteger:
    case OptionType::kNumber: {
      ASSIGN_OR_RETURN(double v, ParseNumber(text));
      return OptionValue(v);
    }
    case OptionType::kSize: {
      const std::string_view unit = alias && alias->scale != 1 ? alias->unit : spec.unit;
      ASSIGN_OR_RETURN(double v, ParseSize(text, BytesPerUnit(unit)));
      return OptionValue(v);
    }
    case OptionType::kDuration: {
      if (spec.allows_none && text == "none") return OptionValue("none");
      ASSIGN_OR_RETURN(auto ms, spec.allows_none ? ParseTimeout(text) : ParseDuration(text));
      return OptionValue(static_cast<double>(ms.count()) / 1000.0 / (alias ? alias->scale : 1));
    }
    case OptionType::kEnvironment: {
      size_t eq = text.find('=');
      if (eq == std::string::npos || eq == 0)
        return InvalidArgument("wants K=V, got '" + text + "'");
      return OptionValue(OptionValue::Environment{{text.substr(0, eq), text.substr(eq + 1)}});
    }
    case OptionType::kList:  // one entry; the CLI and pool specs add them up
      return OptionValue(OptionValue::List{text});
    case OptionType::kString:
    case OptionType::kChoice:
    case OptionType::kData:
      return OptionValue(text);
  }
  return InvalidArgument("cannot parse '" + text + "'");
}

}  // namespace codebox::options
