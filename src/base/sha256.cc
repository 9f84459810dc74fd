#include "base/sha256.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/io.h"
#include "base/text.h"
#include "base/unique_fd.h"

namespace codebox::base {
namespace {

constexpr std::array<uint32_t, 64> kRoundConstants = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

uint32_t RotateRight(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void Compress(std::array<uint32_t, 8>& state, const unsigned char* block) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i) {
    w[i] = (uint32_t{block[4 * i]} << 24) | (uint32_t{block[4 * i + 1]} << 16) |
           (uint32_t{block[4 * i + 2]} << 8) | uint32_t{block[4 * i + 3]};
  }
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = RotateRight(w[i - 15], 7) ^ RotateRight(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = RotateRight(w[i - 2], 17) ^ RotateRight(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t s1 = RotateRight(e, 6) ^ RotateRight(e, 11) ^ RotateRight(e, 25);
    uint32_t ch = (e & f) ^ (~e & g);
    uint32_t t1 = h + s1 + ch + kRoundConstants[i] + w[i];
    uint32_t s0 = RotateRight(a, 2) ^ RotateRight(a, 13) ^ RotateRight(a, 22);
    uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
    uint32_t t2 = s0 + maj;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state[0] += a;
  state[1] += b;
  state[2] += c;
  state[3] += d;
  state[4] += e;
  state[5] += f;
  state[6] += g;
  state[7] += h;
}

}  // namespace

void Sha256::Update(std::string_view data) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  size_t n = data.size();
  total_ += n;
  if (block_len_ > 0) {
    size_t take = std::min(n, sizeof block_ - block_len_);
    std::memcpy(block_ + block_len_, bytes, take);
    block_len_ += take;
    bytes += take;
    n -= take;
    if (block_len_ < sizeof block_) return;
    Compress(state_, block_);
    block_len_ = 0;
  }
  for (; n >= 64; bytes += 64, n -= 64) Compress(state_, bytes);
  std::memcpy(block_, bytes, n);
  block_len_ = n;
}

std::string Sha256::Digest() {
  // Padding: 0x80, zeros, then the message length in bits as a big-endian 64-bit number.
  unsigned char tail[128] = {};
  std::memcpy(tail, block_, block_len_);
  tail[block_len_] = 0x80;
  size_t tail_len = block_len_ + 1 + 8 <= 64 ? 64 : 128;
  uint64_t bits = total_ * 8;
  for (int i = 0; i < 8; ++i) tail[tail_len - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  Compress(state_, tail);
  if (tail_len == 128) Compress(state_, tail + 64);

  std::string out;
  out.reserve(32);
  for (uint32_t word : state_) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(word >> shift));
  }
  return out;
}

std::string Sha256::HexDigest() { return HexEncode(Digest()); }

std::string Sha256Hex(std::string_view data) {
  Sha256 hasher;
  hasher.Update(data);
  return hasher.HexDigest();
}

std::string Sha256Digest(std::string_view data) {
  Sha256 hasher;
  hasher.Update(data);
  return hasher.Digest();
}

StatusOr<std::string> Sha256FileHex(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open " + path);
  Sha256 hasher;
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read " + path);
    if (n == 0) break;
    hasher.Update(std::string_view(buf.data(), static_cast<size_t>(n)));
  }
  return hasher.HexDigest();
}

}  // namespace codebox::base
