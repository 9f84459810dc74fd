#include "e2b/gzip.h"

#include <gtest/gtest.h>
#include <zlib.h>

namespace codebox::e2b {
namespace {

// `data` as one gzip stream, as the SDK's CompressionStream("gzip") makes it.
std::string Gzip(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST(Gunzip, InflatesOneGzipStream) {
  const std::string text = "hello files\n" + std::string(300'000, 'x') + "end";
  auto back = Gunzip(Gzip(text), 1 << 20);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, text);
  EXPECT_EQ(*Gunzip(Gzip(""), 10), "");
}

TEST(Gunzip, ABombStopsAtTheCeiling) {
  const std::string bomb = Gzip(std::string(64 << 20, '\0'));  // about 64 KiB of gzip
  ASSERT_LT(bomb.size(), 200u << 10);
  auto out = Gunzip(bomb, 1 << 20);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kLimitExceeded);
  EXPECT_NE(out.status().message().find("more than 1048576 bytes"), std::string::npos);
}

TEST(Gunzip, WhatIsNotOneWholeGzipStreamIsRefused) {
  const std::string good = Gzip("some data, some data, some data");
  for (const std::string& bad : {std::string("not gzip at all"), good.substr(0, good.size() / 2),
                                 good.substr(0, good.size() - 4) /* no length */, good + "trailing",
                                 good + good, std::string()}) {
    auto out = Gunzip(bad, 1 << 20);
    EXPECT_FALSE(out.ok()) << bad.size();
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << out.status().ToString();
  }
  std::string flipped = good;
  flipped[flipped.size() - 6] ^= 0x55;  // the CRC
  EXPECT_FALSE(Gunzip(flipped, 1 << 20).ok());
}

}  // namespace
}  // namespace codebox::e2b
