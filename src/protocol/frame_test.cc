#include "protocol/frame.h"

#include <gtest/gtest.h>

namespace codebox::protocol {
namespace {

TEST(FrameTest, RoundTripsEveryType) {
  std::string wire;
  AppendFrame(&wire, FrameType::kHello, 0, R"({"version":1})");
  AppendFrame(&wire, FrameType::kStdout, 7, std::string("a\0b", 3));
  AppendFrame(&wire, FrameType::kData, 0xffffffffu, "");
  FrameDecoder decoder;
  decoder.Feed(wire);
  auto f1 = decoder.Next();
  ASSERT_TRUE(f1.ok());
  ASSERT_TRUE(f1->has_value());
  EXPECT_EQ((*f1)->type, FrameType::kHello);
  EXPECT_EQ((*f1)->payload, R"({"version":1})");
  auto f2 = decoder.Next();
  ASSERT_TRUE(f2.ok() && f2->has_value());
  EXPECT_EQ((*f2)->stream, 7u);
  EXPECT_EQ((*f2)->payload, std::string("a\0b", 3));
  auto f3 = decoder.Next();
  ASSERT_TRUE(f3.ok() && f3->has_value());
  EXPECT_EQ((*f3)->stream, 0xffffffffu);
  EXPECT_TRUE((*f3)->payload.empty());
  auto none = decoder.Next();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_TRUE(decoder.CheckEndOfStream().ok());
}

TEST(FrameTest, DecodesByteByByte) {
  std::string wire = EncodeFrame(FrameType::kControl, 3, R"({"op":"exec"})");
  FrameDecoder decoder;
  for (size_t i = 0; i + 1 < wire.size(); ++i) {
    decoder.Feed(wire.substr(i, 1));
    auto f = decoder.Next();
    ASSERT_TRUE(f.ok());
    EXPECT_FALSE(f->has_value()) << "frame complete after " << i + 1 << " bytes";
  }
  decoder.Feed(wire.substr(wire.size() - 1));
  auto f = decoder.Next();
  ASSERT_TRUE(f.ok() && f->has_value());
  EXPECT_EQ((*f)->payload, R"({"op":"exec"})");
}

TEST(FrameTest, OversizedFrameIsAnErrorBeforeItsPayloadArrives) {
  std::string header = EncodeFrame(FrameType::kStdout, 1, "").substr(0, kHeaderSize);
  header[0] = header[1] = header[2] = '\xff';  // ~16 MiB announced
  FrameDecoder decoder(1024);
  decoder.Feed(header);
  auto f = decoder.Next();
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kProtocolError);
  EXPECT_NE(f.status().message().find("exceeds the limit"), std::string::npos);
  // Poisoned: further input does not resurrect it.
  decoder.Feed(EncodeFrame(FrameType::kStdout, 1, "x"));
  EXPECT_FALSE(decoder.Next().ok());
}

TEST(FrameTest, UnknownTypeIsAnError) {
  std::string wire = EncodeFrame(FrameType::kStdout, 1, "x");
  wire[8] = 42;
  FrameDecoder decoder;
  decoder.Feed(wire);
  auto f = decoder.Next();
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("unknown frame type 42"), std::string::npos);
}

TEST(FrameTest, NonZeroReservedBytesAreAnError) {
  std::string wire = EncodeFrame(FrameType::kStdout, 1, "x");
  wire[10] = 1;
  FrameDecoder decoder;
  decoder.Feed(wire);
  auto f = decoder.Next();
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("reserved"), std::string::npos);
}

TEST(FrameTest, TruncatedFrameIsReportedAtEndOfStream) {
  std::string wire = EncodeFrame(FrameType::kStdout, 1, "hello");
  FrameDecoder decoder;
  decoder.Feed(wire.substr(0, wire.size() - 2));
  auto f = decoder.Next();
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->has_value());
  Status eos = decoder.CheckEndOfStream();
  EXPECT_EQ(eos.code(), StatusCode::kProtocolError);
  EXPECT_NE(eos.message().find("truncated"), std::string::npos);
}

TEST(FrameTest, ManyFramesKeepTheBufferBounded) {
  FrameDecoder decoder;
  std::string chunk(kDataChunk, 'z');
  for (int i = 0; i < 200; ++i) {
    decoder.Feed(EncodeFrame(FrameType::kData, 1, chunk));
    auto f = decoder.Next();
    ASSERT_TRUE(f.ok() && f->has_value());
    EXPECT_EQ((*f)->payload.size(), chunk.size());
  }
  EXPECT_FALSE(decoder.HasPartialFrame());
}

}  // namespace
}  // namespace codebox::protocol
