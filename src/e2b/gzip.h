// Content-Encoding: gzip, as E2B's SDK sends an upload it was asked to compress
// (files.write(..., {gzip: true})). The body is hostile: it is inflated with a ceiling on what
// comes out (a few KiB of gzip can inflate to gigabytes) and must be exactly one gzip stream.
#ifndef CODEBOX_E2B_GZIP_H_
#define CODEBOX_E2B_GZIP_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "codebox/status.h"

namespace codebox::e2b {

// The inflated bytes. kLimitExceeded past max_bytes; kInvalidArgument for a body that is not
// one whole gzip stream (corrupt, cut short, or followed by other bytes).
StatusOr<std::string> Gunzip(std::string_view body, uint64_t max_bytes);

}  // namespace codebox::e2b

#endif  // CODEBOX_E2B_GZIP_H_
