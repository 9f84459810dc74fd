// Decodes a chart a cell gave back (base64 PNG, decoded first with cell_images::DecodeBase64)
// on the host, to check its size and that it is not blank. Enough of PNG for what matplotlib
// writes: 8-bit RGB or RGBA, not interlaced.
#ifndef CODEBOX_TESTS_BOX_PNG_TEST_UTIL_H_
#define CODEBOX_TESTS_BOX_PNG_TEST_UTIL_H_

#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "cell_images/image_data.h"

namespace codebox::testing {

struct DecodedPng {
  uint32_t width = 0, height = 0;
  size_t distinct_colours = 0;  // in a sample of pixels
  double non_background = 0;    // fraction of pixels unlike the top-left one
};

inline uint32_t Be32(const std::string& s, size_t at) {
  return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) |
         (uint32_t(uint8_t(s[at + 2])) << 8) | uint32_t(uint8_t(s[at + 3]));
}

// nullopt (and *why) when it is not a PNG this decoder reads.
inline std::optional<DecodedPng> DecodePng(const std::string& png, std::string* why) {
  auto size = cell_images::PngSize(png);
  if (!size.ok() || !size->has_value()) {
    *why = size.ok() ? "an IHDR with no believable size" : size.status().message();
    return std::nullopt;
  }
  DecodedPng d{.width = (*size)->width, .height = (*size)->height};
  // PngSize checked that a 13-byte IHDR comes first: depth, colour type, ..., interlace.
  const int depth = uint8_t(png[24]), colour = uint8_t(png[25]);
  if (png[28] != 0) {
    *why = "interlaced";
    return std::nullopt;
  }
  std::string idat;
  for (size_t at = 8; at + 12 <= png.size();) {
    uint32_t len = Be32(png, at);
    if (at + 12 + len > png.size()) break;
    if (png.compare(at + 4, 4, "IDAT") == 0) idat += png.substr(at + 8, len);
    at += 12 + len;
  }
  const int channels = colour == 6 ? 4 : colour == 2 ? 3 : 0;
  if (depth != 8 || channels == 0 || d.width > 10000 || d.height > 10000) {
    *why = "unsupported IHDR (depth " + std::to_string(depth) + ", colour type " +
           std::to_string(colour) + ")";
    return std::nullopt;
  }
  const size_t stride = size_t(d.width) * channels;
  std::string raw((stride + 1) * d.height, '\0');
  uLongf raw_len = raw.size();
  if (uncompress(reinterpret_cast<Bytef*>(raw.data()), &raw_len,
                 reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK ||
      raw_len != raw.size()) {
    *why = "IDAT does not inflate to the image size";
    return std::nullopt;
  }
  // Undo the per-row filters (PNG spec, section 9).
  std::string pixels(stride * d.height, '\0');
  for (size_t y = 0; y < d.height; ++y) {
    const uint8_t filter = uint8_t(raw[y * (stride + 1)]);
    const uint8_t* in = reinterpret_cast<const uint8_t*>(raw.data()) + y * (stride + 1) + 1;
    uint8_t* row = reinterpret_cast<uint8_t*>(pixels.data()) + y * stride;
    const uint8_t* up = y > 0 ? row - stride : nullptr;
    for (size_t x = 0; x < stride; ++x) {
      int a = x >= size_t(channels) ? row[x - channels] : 0;
      int b = up ? up[x] : 0;
      int c = (up && x >= size_t(channels)) ? up[x - channels] : 0;
      int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
      int pred = filter == 1   ? a
                 : filter == 2 ? b
                 : filter == 3 ? (a + b) / 2
                 : filter == 4 ? (pa <= pb && pa <= pc ? a
                                  : pb <= pc           ? b
                                                       : c)
                               : 0;
      row[x] = uint8_t(in[x] + pred);
    }
  }
  std::set<std::string> colours;
  size_t differ = 0;
  const std::string background = pixels.substr(0, channels);
  for (size_t i = 0; i < size_t(d.width) * d.height; ++i) {
    std::string px = pixels.substr(i * channels, channels);
    if (px != background) ++differ;
    if (i % 7 == 0 && colours.size() < 1000) colours.insert(px);
  }
  d.distinct_colours = colours.size();
  d.non_background = double(differ) / (double(d.width) * d.height);
  return d;
}

}  // namespace codebox::testing

#endif  // CODEBOX_TESTS_BOX_PNG_TEST_UTIL_H_
