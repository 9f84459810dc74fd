#include "base/text.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstdio>

namespace codebox::base {
namespace {

void AppendEscape(std::string* out, unsigned char byte) {
  static const char kHex[] = "0123456789abcdef";
  out->append("\\x");
  out->push_back(kHex[byte >> 4]);
  out->push_back(kHex[byte & 0xf]);
}

// Length of the valid UTF-8 sequence at text[i] (2..4), or 0 if there is none; C1 controls
// (U+0080..U+009F) count as none unless `allow_c1`.
size_t Utf8SequenceLength(std::string_view text, size_t i, bool allow_c1 = false) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char b0 = byte(i);
  size_t len = b0 >= 0xf0 ? 4 : b0 >= 0xe0 ? 3 : b0 >= 0xc2 ? 2 : 0;
  if (len == 0 || b0 > 0xf4 || i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
  }
  unsigned char b1 = byte(i + 1);
  if (b0 == 0xe0 && b1 < 0xa0) return 0;               // overlong
  if (b0 == 0xed && b1 >= 0xa0) return 0;              // UTF-16 surrogates
  if (b0 == 0xf0 && b1 < 0x90) return 0;               // overlong
  if (b0 == 0xf4 && b1 >= 0x90) return 0;              // above U+10FFFF
  if (b0 == 0xc2 && b1 < 0xa0 && !allow_c1) return 0;  // C1 controls U+0080..U+009F
  return len;
}

}  // namespace

std::string TerminalSafe(std::string_view text, size_t max_bytes) {
  size_t cut = 0;
  if (text.size() > max_bytes) {
    cut = text.size() - max_bytes;
    text = text.substr(0, max_bytes);
  }
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    auto b = static_cast<unsigned char>(text[i]);
    if (b == '\n' || b == '\t' || (b >= 0x20 && b < 0x7f)) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    if (size_t len = b >= 0x80 ? Utf8SequenceLength(text, i) : 0; len > 0) {
      out.append(text.substr(i, len));
      i += len;
      continue;
    }
    AppendEscape(&out, b);
    ++i;
  }
  if (cut > 0) out += "...[" + std::to_string(cut) + " bytes cut]";
  return out;
}

bool IsValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t len = Utf8SequenceLength(text, i, /*allow_c1=*/true);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string_view ClosestWord(std::string_view word,
                             const std::vector<std::string_view>& candidates) {
  std::string_view best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (std::string_view candidate : candidates) {
    // The distance is at least the difference in length: a word far longer than every
    // candidate (a client's 60 MB "option name") costs nothing and suggests nothing.
    size_t gap = word.size() > candidate.size() ? word.size() - candidate.size()
                                                : candidate.size() - word.size();
    if (gap >= best_distance) continue;
    size_t d = EditDistance(word, candidate);
    if (d < best_distance) best_distance = d, best = candidate;
  }
  return best;
}

std::string TailLines(const std::string& text, size_t max_lines) {
  size_t end = text.size();
  while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == '\r')) --end;
  size_t pos = end;
  for (size_t lines = 0; pos > 0; --pos) {
    if (text[pos - 1] == '\n' && ++lines == max_lines) break;
  }
  return text.substr(pos, end - pos);
}

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string FormatSize(uint64_t bytes) {
  char buf[32];
  double b = static_cast<double>(bytes);
  if (bytes >= (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", b / (1 << 30));
  } else if (bytes >= (uint64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.0f MiB", b / (1 << 20));
  } else if (bytes >= 1024) {
    std::snprintf(buf, sizeof buf, "%.0f KiB", b / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  }
  return buf;
}

namespace {

constexpr int kBad = -1;
constexpr int kSkip = -2;  // whitespace
constexpr int kPad = -3;

constexpr std::array<int, 256> MakeBase64Table() {
  std::array<int, 256> t{};
  for (int& v : t) v = kBad;
  constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(kAlphabet[i])] = i;
  for (char c : {' ', '\t', '\r', '\n'}) t[static_cast<unsigned char>(c)] = kSkip;
  t['='] = kPad;
  return t;
}
constexpr std::array<int, 256> kBase64Table = MakeBase64Table();

}  // namespace

std::string EncodeBase64(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (static_cast<unsigned char>(bytes[i]) << 16) |
                       (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (const size_t rest = bytes.size() - i; rest > 0) {
    uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    if (rest == 2) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

StatusOr<std::string> DecodeBase64(std::string_view text, uint64_t max_bytes) {
  // Every 4 characters give at most 3 bytes: refuse before allocating anything big.
  if (text.size() / 4 * 3 > max_bytes + 3) {
    return LimitExceeded("the data is bigger than its limit of " + std::to_string(max_bytes) +
                         " bytes");
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t group = 0;
  int filled = 0;   // sextets in `group`
  int padding = 0;  // '=' seen; only more '=' and whitespace may follow
  for (size_t i = 0; i < text.size(); ++i) {
    int v = kBase64Table[static_cast<unsigned char>(text[i])];
    if (v == kSkip) continue;
    if (v == kBad) {
      return InvalidArgument("not valid base64 (a character outside its alphabet at offset " +
                             std::to_string(i) + ")");
    }
    if (v == kPad) {
      // "xx==" or "xxx=": padding fills the rest of a group that has 2 or 3 sextets.
      if (padding > 0 && filled == 0) return InvalidArgument("not valid base64 (too much '=')");
      if (filled + padding < 2) return InvalidArgument("not valid base64 (misplaced '=')");
      ++padding;
      if (filled + padding > 4) return InvalidArgument("not valid base64 (too much '=')");
      if (filled + padding == 4) {
        if (filled == 2) out.push_back(static_cast<char>(group >> 4));
        if (filled == 3) {
          out.push_back(static_cast<char>(group >> 10));
          out.push_back(static_cast<char>(group >> 2));
        }
        filled = 0;
        group = 0;
      }
      continue;
    }
    if (padding > 0) return InvalidArgument("not valid base64 (data after '=')");
    group = group << 6 | static_cast<uint32_t>(v);
    if (++filled == 4) {
      out.push_back(static_cast<char>(group >> 16));
      out.push_back(static_cast<char>(group >> 8));
      out.push_back(static_cast<char>(group));
      filled = 0;
      group = 0;
    }
  }
  if (filled != 0) return InvalidArgument("not valid base64 (its length is not a multiple of 4)");
  if (out.size() > max_bytes) {
    return LimitExceeded("the data is bigger than its limit of " + std::to_string(max_bytes) +
                         " bytes");
  }
  return out;
}

std::optional<uint64_t> ParseDecimal(std::string_view text, uint64_t max) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  uint64_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (n > (max - digit) / 10) return std::nullopt;  // n * 10 + digit would pass max
    n = n * 10 + digit;
  }
  return n;
}

bool IsUserName(std::string_view name) {
  if (name.empty() || name.size() > 32) return false;
  if (!std::islower(static_cast<unsigned char>(name[0])) && name[0] != '_') return false;
  for (char c : name) {
    if (!std::islower(static_cast<unsigned char>(c)) &&
        !std::isdigit(static_cast<unsigned char>(c)) && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (char c : bytes) {
    auto b = static_cast<unsigned char>(c);
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 0xf]);
  }
  return hex;
}

std::optional<std::string> HexDecode(std::string_view hex) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string bytes;
  bytes.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(hi << 4 | lo));
  }
  return bytes;
}

std::string PercentEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace codebox::base
