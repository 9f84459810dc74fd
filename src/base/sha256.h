// A small SHA-256 (FIPS 180-4): images' content-addressed ids, and E2B's file-URL signatures
// without a crypto library. Its time depends on the data's length only (no branch on the data,
// no table indexed by it); it is no HMAC, and no substitute for a vetted library's primitives.
#ifndef CODEBOX_BASE_SHA256_H_
#define CODEBOX_BASE_SHA256_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "codebox/status.h"

namespace codebox::base {

// Incremental hashing, for blobs too big to hold in memory.
class Sha256 {
 public:
  void Update(std::string_view data);
  // The 32-byte digest of everything given; the hasher is spent after.
  std::string Digest();
  // The same in lower-case hex (64 characters).
  std::string HexDigest();

 private:
  std::array<uint32_t, 8> state_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  unsigned char block_[64] = {};
  size_t block_len_ = 0;
  uint64_t total_ = 0;
};

// Lower-case hex digest (64 characters) of data.
std::string Sha256Hex(std::string_view data);
// The 32-byte digest of data.
std::string Sha256Digest(std::string_view data);
// The digest of the file at `path`, read in pieces.
StatusOr<std::string> Sha256FileHex(const std::string& path);

}  // namespace codebox::base

#endif  // CODEBOX_BASE_SHA256_H_
