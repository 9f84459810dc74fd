#include "mcp/content.h"

#include "base/text.h"
#include "cell_images/image_data.h"

namespace codebox::mcp {
namespace {

std::string CutNote(uint64_t total, uint64_t max_bytes) {
  return "\n[... " + std::to_string(total - max_bytes) + " more bytes cut: a result keeps " +
         base::FormatSize(max_bytes) + " of each text]";
}

}  // namespace

std::string SafeText(std::string_view text, uint64_t max_bytes) {
  std::string safe = base::TerminalSafe(text.substr(0, max_bytes), max_bytes);
  if (text.size() > max_bytes) safe += CutNote(text.size(), max_bytes);
  return safe;
}

std::string SafeText(const std::vector<std::string>& chunks, uint64_t max_bytes) {
  std::string kept;
  uint64_t total = 0;
  for (const std::string& chunk : chunks) {
    total += chunk.size();
    if (kept.size() < max_bytes) kept.append(chunk, 0, max_bytes - kept.size());
  }
  std::string safe = base::TerminalSafe(kept, max_bytes);
  if (total > max_bytes) safe += CutNote(total, max_bytes);
  return safe;
}

bool IsUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // cut short
    for (size_t k = 1; k <= n; ++k) {
      const auto t = static_cast<unsigned char>(s[i + k]);
      if ((t & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (t & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

std::string ImageType(std::string_view bytes) {
  if (auto png = cell_images::PngSize(bytes); png.ok()) return "image/png";
  if (auto jpeg = cell_images::JpegSize(bytes); jpeg.ok()) return "image/jpeg";
  return "";
}

StatusOr<std::string> CheckedImage(std::string_view base64, std::string_view mime,
                                   uint64_t max_bytes) {
  auto bytes = cell_images::DecodeBase64(base64, max_bytes);
  if (!bytes.ok()) {
    if (bytes.status().code() == StatusCode::kLimitExceeded) {
      return LimitExceeded("larger than " + base::FormatSize(max_bytes) +
                           " (the most one image may be)");
    }
    return InvalidArgument("not valid base64");
  }
  if (ImageType(*bytes) != mime) {
    return InvalidArgument("not a " + std::string(mime) + " (its header does not match)");
  }
  return base::EncodeBase64(*bytes);
}

}  // namespace codebox::mcp
