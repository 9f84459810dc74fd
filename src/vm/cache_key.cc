#include "vm/cache_key.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>

#include "base/io.h"
#include "base/unique_fd.h"

namespace codebox::vm {
namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t Fnv(uint64_t h, const char* data, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= kFnvPrime;
  }
  return h;
}

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::string HashHex(std::string_view data) {
  return Hex64(Fnv(kFnvOffset, data.data(), data.size()));
}

StatusOr<std::string> HashFileHex(const std::string& path) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return base::ErrnoStatus("open " + path);
  uint64_t h = kFnvOffset;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return base::ErrnoStatus("read " + path);
    }
    if (n == 0) break;
    h = Fnv(h, buf, static_cast<size_t>(n));
  }
  return Hex64(h);
}

}  // namespace codebox::vm
