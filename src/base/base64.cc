#include "base/base64.h"

namespace codebox::base {
namespace {

// 0..63 for the alphabet, -1 for anything else.
int Sextet(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

StatusOr<std::string> Base64Decode(std::string_view text) {
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t bits = 0;
  int count = 0;    // sextets in the current group of four
  int padding = 0;  // '=' seen; only more padding and whitespace may follow
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      if (count < 2 || count + padding >= 4) {
        return InvalidArgument("base64: misplaced '=' at offset " + std::to_string(i));
      }
      ++padding;
      continue;
    }
    const int v = Sextet(c);
    if (v < 0 || padding > 0) {
      return InvalidArgument("base64: unexpected character at offset " + std::to_string(i));
    }
    bits = (bits << 6) | static_cast<uint32_t>(v);
    if (++count == 4) {
      out.push_back(static_cast<char>(bits >> 16));
      out.push_back(static_cast<char>(bits >> 8));
      out.push_back(static_cast<char>(bits));
      bits = 0;
      count = 0;
    }
  }
  if (count == 1) return InvalidArgument("base64: the data ends one character into a group");
  if (padding > 0 && count + padding != 4) {
    return InvalidArgument("base64: wrong amount of '=' padding");
  }
  if (count == 2) out.push_back(static_cast<char>(bits >> 4));
  if (count == 3) {
    out.push_back(static_cast<char>(bits >> 10));
    out.push_back(static_cast<char>(bits >> 2));
  }
  return out;
}

}  // namespace codebox::base
