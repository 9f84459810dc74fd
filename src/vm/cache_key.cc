#include "vm/cache_key.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

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

StatusOr<std::string> HashSparseFileHex(const std::string& path) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return base::ErrnoStatus("open " + path);
  constexpr size_t kPage = 4096;
  static const char kZeros[kPage] = {};
  uint64_t h = kFnvOffset;
  std::string buf(1 << 20, '\0');
  off_t at = 0;
  for (;;) {
    off_t data = ::lseek(fd.get(), at, SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) break;  // no data past `at`
      return base::ErrnoStatus("seek " + path);
    }
    off_t hole = ::lseek(fd.get(), data, SEEK_HOLE);
    if (hole < 0) return base::ErrnoStatus("seek " + path);
    for (off_t pos = data; pos < hole;) {
      size_t want = static_cast<size_t>(std::min<off_t>(hole - pos, static_cast<off_t>(buf.size())));
      ssize_t n = ::pread(fd.get(), buf.data(), want, pos);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return base::ErrnoStatus("read " + path);
      if (n == 0) break;
      // Pages of zeros count as holes: a tmpfs fills holes with them when a private mapping
      // of the file reads there, which changes the layout but not the contents.
      for (size_t page = 0; page < static_cast<size_t>(n); page += kPage) {
        size_t len = std::min(kPage, static_cast<size_t>(n) - page);
        if (std::memcmp(buf.data() + page, kZeros, len) == 0) continue;
        off_t offset = pos + static_cast<off_t>(page);
        h = Fnv(h, reinterpret_cast<const char*>(&offset), sizeof offset);
        h = Fnv(h, buf.data() + page, len);
      }
      pos += n;
    }
    at = hole;
  }
  return Hex64(h);
}

}  // namespace codebox::vm
