// JSON from anyone who is not this process (an HTTP client, an MCP client, a peer replica, a
// model endpoint, the agent in a box) is parsed here, under a nesting bound and a size bound,
// so that no caller can be handed a value whose dump() or recursive walk overflows the stack.
// And a value is echoed into an error or a log only through JsonExcerpt, which is short.
//
//   ASSIGN_OR_RETURN(nlohmann::json body, base::ParseJson(request.body, {}, "the request body"));
//   return InvalidArgument("'env' must be an object, got " + base::JsonExcerpt(value));
#ifndef CODEBOX_BASE_JSON_H_
#define CODEBOX_BASE_JSON_H_

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "codebox/status.h"

namespace codebox::base {

struct JsonLimits {
  // Arrays and objects nested in one another. Every message codebox speaks fits in far less;
  // a recursive walk of this depth is a few KiB of stack.
  size_t max_depth = 64;
  // The text's length in bytes.
  size_t max_bytes = 64ull << 20;
};

// `text` as one JSON value. kInvalidArgument when it is too large, nested too deep or not JSON
// (invalid UTF-8 in a string is not JSON); the message names `what` and a byte offset and
// never quotes the text.
StatusOr<nlohmann::json> ParseJson(std::string_view text, const JsonLimits& limits = {},
                                   std::string_view what = "the JSON text");

// ParseJson for callers that only need to know whether it worked: a discarded value
// (is_discarded()) when it did not.
nlohmann::json ParseJsonOrDiscarded(std::string_view text, const JsonLimits& limits = {});

// Follows a JSON text one character at a time and says which characters belong to strings,
// for scanners that must skip strings without parsing (nesting depth, where a value ends).
class JsonStringScanner {
 public:
  // True when c is part of a string: its opening or closing quote, or a character inside.
  bool InString(char c) {
    if (in_string_) {
      if (escaped_) escaped_ = false;
      else if (c == '\\') escaped_ = true;
      else if (c == '"') in_string_ = false;
      return true;
    }
    in_string_ = c == '"';
    return in_string_;
  }

 private:
  bool in_string_ = false;
  bool escaped_ = false;
};

// How deep `text` nests arrays and objects, counted without parsing (strings skipped), stopping
// early once past `stop_after`. For a text that is not JSON the count is meaningless but bounded.
size_t JsonNestingDepth(std::string_view text, size_t stop_after);

// `value`'s JSON text (`indent` as dump()'s) with bytes that are not UTF-8 replaced by U+FFFD:
// never throws for text from a box (files are the way to move bytes exactly).
std::string JsonText(const nlohmann::json& value, int indent = -1);

// `value` for an error message or a log line: its JSON text, cut to at most `max_chars`
// characters (then ending in "..."); bytes that are not UTF-8 replaced.
std::string JsonExcerpt(const nlohmann::json& value, size_t max_chars = 64);

// `text` cut to at most `max_chars` bytes (then ending in "..."), for echoing a client's string.
std::string Excerpt(std::string_view text, size_t max_chars = 64);

}  // namespace codebox::base

#endif  // CODEBOX_BASE_JSON_H_
