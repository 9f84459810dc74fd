// Checked decoding of the images a cell returns. Everything here parses bytes that came out of
// a box, so nothing trusts them: bad base64 is an error, not garbage; a size comes from a
// header that was checked to be there and to hold a size the format allows.
#ifndef CODEBOX_CELL_IMAGES_IMAGE_DATA_H_
#define CODEBOX_CELL_IMAGES_IMAGE_DATA_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/text.h"
#include "codebox/status.h"

namespace codebox::cell_images {

// Jupyter sends image/png as base64: base::DecodeBase64 (base/text.h).
using base::DecodeBase64;

struct PixelSize {
  uint32_t width = 0;
  uint32_t height = 0;
};

// What a PNG's IHDR says. kInvalidArgument when the data is not a PNG (no signature), is cut
// before the end of IHDR, or its first chunk is not a 13-byte IHDR. A header that is there
// but claims a size PNG does not allow (0, or over 2^31-1) gives nullopt: the file may still
// be worth keeping, its size is not worth believing.
StatusOr<std::optional<PixelSize>> PngSize(std::string_view png);

// The size in a JPEG's first SOFn frame header. kInvalidArgument when the data does not start
// with SOI; nullopt when no frame header with a non-zero size comes before the data ends.
StatusOr<std::optional<PixelSize>> JpegSize(std::string_view jpeg);

}  // namespace codebox::cell_images

#endif  // CODEBOX_CELL_IMAGES_IMAGE_DATA_H_
