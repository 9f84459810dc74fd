#include "base/json.h"

namespace codebox::base {

size_t JsonNestingDepth(std::string_view text, size_t stop_after) {
  size_t depth = 0, deepest = 0;
  JsonStringScanner strings;
  for (char c : text) {
    if (strings.InString(c)) continue;
    switch (c) {
      case '[':
      case '{':
        if (++depth > deepest) deepest = depth;
        if (deepest > stop_after) return deepest;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return deepest;
}

StatusOr<nlohmann::json> ParseJson(std::string_view text, const JsonLimits& limits,
                                   std::string_view what) {
  if (text.size() > limits.max_bytes) {
    return InvalidArgument(std::string(what) + " is " + std::to_string(text.size()) +
                           " bytes; at most " + std::to_string(limits.max_bytes) + " are read");
  }
  // Counted before parsing: the parser itself is iterative, but what callers do with a value
  // (dump(), a recursive walk) is not.
  if (JsonNestingDepth(text, limits.max_depth) > limits.max_depth) {
    return InvalidArgument(std::string(what) + " nests arrays and objects more than " +
                           std::to_string(limits.max_depth) + " deep");
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 9: syntax
    // error while parsing value - invalid literal; last read: '<up to 16 bytes of input>'".
    // Only the part before "; last read" is kept: it names the place, not the client's bytes.
    std::string detail = e.what();
    size_t bracket = detail.find("] ");
    if (bracket != std::string::npos) detail = detail.substr(bracket + 2);
    size_t last_read = detail.find("; last read");
    if (last_read != std::string::npos) detail.resize(last_read);
    return InvalidArgument(std::string(what) + " is not valid JSON (byte " +
                           std::to_string(e.byte) + "): " + Excerpt(detail, 200));
  }
}

nlohmann::json ParseJsonOrDiscarded(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes || JsonNestingDepth(text, limits.max_depth) > limits.max_depth) {
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

std::string Excerpt(std::string_view text, size_t max_chars) {
  if (text.size() <= max_chars) return std::string(text);
  size_t cut = max_chars;
  // Not in the middle of a UTF-8 sequence.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

std::string JsonText(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string JsonExcerpt(const nlohmann::json& value, size_t max_chars) {
  // A value of bounded depth dumps safely; a large one is dumped whole and then cut, which
  // costs at most what the text it came from did.
  if (value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    if (s.size() > max_chars) {
      return Excerpt(JsonText(nlohmann::json(s.substr(0, max_chars))), max_chars);
    }
  }
  return Excerpt(JsonText(value), max_chars);
}

}  // namespace codebox::base
