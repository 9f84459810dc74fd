// Text from a box made safe to show on a terminal or in a log.
#ifndef CODEBOX_BASE_TEXT_H_
#define CODEBOX_BASE_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/status.h"

namespace codebox::base {

// Returns `text` with every byte a terminal could act on written as a visible escape:
// C0 controls but newline and tab become "\xNN", as do DEL, C1 controls (U+0080..U+009F) and
// bytes that are not valid UTF-8. So an agent log line, a guest console tail or an error text
// from a box cannot move the cursor, set the title, change colours or hide text.
// At most `max_bytes` of input are kept; the rest becomes "...[N bytes cut]".
std::string TerminalSafe(std::string_view text, size_t max_bytes = 64u << 10);

// The last `max_lines` lines of `text`, without trailing newlines (for error messages).
std::string TailLines(const std::string& text, size_t max_lines);

// `s` with A-Z made a-z (header names, hosts, media types; no locale).
std::string AsciiLower(std::string_view s);

// A size for people: "512 B", "3 KiB", "163 MiB", "1.2 GiB".
std::string FormatSize(uint64_t bytes);

// Every byte but RFC 3986's unreserved characters (letters, digits, - . _ ~) as %XX: a query
// value or a path segment.
std::string PercentEncode(std::string_view text);

// Standard padded base64 (RFC 4648).
std::string EncodeBase64(std::string_view bytes);
// And back. Whitespace between the characters is skipped (base64.encodebytes breaks lines).
// kInvalidArgument for any other character, a bad length or misplaced padding; kLimitExceeded
// when the decoded data would pass max_bytes (checked before anything is decoded).
StatusOr<std::string> DecodeBase64(std::string_view text, uint64_t max_bytes);

// Lower-case hex, two digits a byte; and back (nullopt for odd lengths or non-hex digits).
std::string HexEncode(std::string_view bytes);

// A decimal number of digits only (no sign, no spaces, no "0x"), at most `max`; nullopt
// otherwise (also past uint64's range).
std::optional<uint64_t> ParseDecimal(std::string_view text, uint64_t max);

// A user name as useradd takes it by default: [a-z_][a-z0-9_-]*, at most 32 bytes.
bool IsUserName(std::string_view name);
std::optional<std::string> HexDecode(std::string_view hex);

// True when `text` is well-formed UTF-8 (C1 controls included; no overlongs, surrogates or
// code points past U+10FFFF).
bool IsValidUtf8(std::string_view text);

// Edit distance with adjacent transpositions (so "memroy" is one step from "memory").
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate a few slips from `word` ("rnu" -> "run"), for "did you mean" hints: the
// nearest within max(2, size/3) edits, or "" when none is that near.
std::string_view ClosestWord(std::string_view word,
                             const std::vector<std::string_view>& candidates);

}  // namespace codebox::base

#endif  // CODEBOX_BASE_TEXT_H_
