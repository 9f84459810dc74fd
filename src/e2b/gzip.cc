#include "e2b/gzip.h"

#include <zlib.h>

#include <algorithm>
#include <climits>

namespace codebox::e2b {

StatusOr<std::string> Gunzip(std::string_view body, uint64_t max_bytes) {
  z_stream z{};
  // 16 + MAX_WBITS: a gzip header and trailer (the CRC and length are checked), no zlib or
  // raw deflate.
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return Internal("gzip: inflateInit2 failed");
  std::string out;
  std::string chunk(64 << 10, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  int rc = Z_OK;
  // A body larger than zlib's counter takes several rounds of input.
  size_t fed = 0;
  auto feed = [&] {
    const size_t n = std::min<size_t>(body.size() - fed, UINT_MAX);
    z.avail_in = static_cast<uInt>(n);
    fed += n;
  };
  feed();
  Status failed = Status::Ok();
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(chunk.data());
    z.avail_out = static_cast<uInt>(chunk.size());
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      failed = InvalidArgument(std::string("gzip body: ") + (rc == Z_BUF_ERROR ? "cut short"
                                                             : z.msg           ? z.msg
                                                                               : "corrupt"));
      break;
    }
    const size_t made = chunk.size() - z.avail_out;
    if (out.size() + made > max_bytes) {
      failed = Status(StatusCode::kLimitExceeded, "gzip body: it inflates to more than " +
                                                      std::to_string(max_bytes) +
                                                      " bytes, the most this upload may hold");
      break;
    }
    out.append(chunk.data(), made);
    if (z.avail_in == 0 && fed < body.size()) feed();
    if (rc == Z_OK && made == 0 && z.avail_in == 0) {
      failed = InvalidArgument("gzip body: cut short");
      break;
    }
  }
  const bool trailing = failed.ok() && (z.avail_in != 0 || fed != body.size());
  inflateEnd(&z);
  if (!failed.ok()) return failed;
  if (trailing) return InvalidArgument("gzip body: other bytes follow the gzip stream");
  return out;
}

}  // namespace codebox::e2b
