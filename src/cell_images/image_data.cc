#include "cell_images/image_data.h"


namespace codebox::cell_images {
namespace {

uint32_t BigEndian32(std::string_view s, size_t at) {
  return static_cast<uint32_t>(static_cast<unsigned char>(s[at])) << 24 |
         static_cast<uint32_t>(static_cast<unsigned char>(s[at + 1])) << 16 |
         static_cast<uint32_t>(static_cast<unsigned char>(s[at + 2])) << 8 |
         static_cast<uint32_t>(static_cast<unsigned char>(s[at + 3]));
}

uint32_t BigEndian16(std::string_view s, size_t at) {
  return static_cast<uint32_t>(static_cast<unsigned char>(s[at])) << 8 |
         static_cast<uint32_t>(static_cast<unsigned char>(s[at + 1]));
}

}  // namespace

StatusOr<std::optional<PixelSize>> PngSize(std::string_view png) {
  static constexpr std::string_view kSignature("\x89PNG\r\n\x1a\n", 8);
  if (png.substr(0, 8) != kSignature) return InvalidArgument("not a PNG (no PNG signature)");
  // signature, IHDR length (4), "IHDR", width (4), height (4), and 5 more bytes of IHDR.
  if (png.size() < 8 + 4 + 4 + 13) return InvalidArgument("a PNG cut short before its header ends");
  if (BigEndian32(png, 8) != 13 || png.substr(12, 4) != "IHDR") {
    return InvalidArgument("a PNG whose first chunk is not its 13-byte IHDR header");
  }
  PixelSize size{BigEndian32(png, 16), BigEndian32(png, 20)};
  constexpr uint32_t kMax = 0x7fffffff;  // PNG's own limit
  if (size.width == 0 || size.height == 0 || size.width > kMax || size.height > kMax) {
    return std::optional<PixelSize>();
  }
  return std::optional<PixelSize>(size);
}

StatusOr<std::optional<PixelSize>> JpegSize(std::string_view jpeg) {
  if (jpeg.size() < 2 || static_cast<unsigned char>(jpeg[0]) != 0xff ||
      static_cast<unsigned char>(jpeg[1]) != 0xd8) {
    return InvalidArgument("not a JPEG (no SOI marker)");
  }
  size_t at = 2;
  // Segment by segment; every step moves forward, so this ends with the data.
  while (at + 4 <= jpeg.size()) {
    if (static_cast<unsigned char>(jpeg[at]) != 0xff) break;  // lost sync: give up
    unsigned char marker = static_cast<unsigned char>(jpeg[at + 1]);
    if (marker == 0xff) {  // fill byte
      ++at;
      continue;
    }
    if (marker == 0x01 || (marker >= 0xd0 && marker <= 0xd9)) {  // no length
      at += 2;
      continue;
    }
    uint32_t length = BigEndian16(jpeg, at + 2);
    if (length < 2) break;
    bool frame =
        marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 && marker != 0xcc;
    if (frame && at + 9 <= jpeg.size()) {
      PixelSize size{BigEndian16(jpeg, at + 7), BigEndian16(jpeg, at + 5)};
      if (size.width == 0 || size.height == 0) break;
      return std::optional<PixelSize>(size);
    }
    at += 2 + length;
  }
  return std::optional<PixelSize>();
}

}  // namespace codebox::cell_images
