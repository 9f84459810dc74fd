// A small SHA-256 (FIPS 180-4), enough to give images a content-addressed id without a crypto
// library. Not constant-time; never use it for secrets.
#ifndef CODEBOX_IMAGE_SHA256_H_
#define CODEBOX_IMAGE_SHA256_H_

#include <string>
#include <string_view>

namespace codebox::image {

// Lower-case hex digest (64 characters) of data.
std::string Sha256Hex(std::string_view data);

}  // namespace codebox::image

#endif  // CODEBOX_IMAGE_SHA256_H_
