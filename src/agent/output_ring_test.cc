#include "agent/output_ring.h"

#include <gtest/gtest.h>

#include <string>

namespace codebox::agent {
namespace {

// Everything the ring holds, from `from` on, as Peek hands it out.
std::string Drain(const OutputRing& ring, uint64_t from, size_t chunk = 3) {
  std::string out;
  for (std::string_view piece; !(piece = ring.Peek(from, chunk)).empty(); from += piece.size()) {
    out.append(piece);
  }
  return out;
}

TEST(OutputRing, HoldsEverythingUnderItsCapacity) {
  OutputRing ring(16);
  ring.Append("hello ");
  ring.Append("world");
  EXPECT_EQ(ring.total(), 11u);
  EXPECT_EQ(ring.start(), 0u);
  EXPECT_EQ(Drain(ring, 0), "hello world");
  EXPECT_EQ(Drain(ring, 6), "world");
  EXPECT_TRUE(ring.Peek(11, 5).empty()) << "nothing past the end";
}

TEST(OutputRing, KeepsTheLastBytesAndCountsTheDropped) {
  OutputRing ring(8);
  ring.Append("0123456789");  // more than fits in one call
  EXPECT_EQ(ring.total(), 10u);
  EXPECT_EQ(ring.start(), 2u);
  EXPECT_EQ(Drain(ring, ring.start()), "23456789");
  ring.Append("abc");  // wraps around
  EXPECT_EQ(ring.start(), 5u);
  EXPECT_EQ(Drain(ring, 5), "56789abc");
  EXPECT_TRUE(ring.Peek(4, 10).empty()) << "offset 4 fell out";
  for (int i = 0; i < 100; ++i) ring.Append("xy");
  EXPECT_EQ(ring.total(), 213u);
  EXPECT_EQ(Drain(ring, ring.start(), 5), "xyxyxyxy");
}

TEST(OutputRing, ZeroCapacityHoldsNothing) {
  OutputRing ring(0);
  ring.Append("data");
  EXPECT_EQ(ring.total(), 4u);
  EXPECT_EQ(ring.start(), 4u);
  EXPECT_TRUE(ring.Peek(4, 10).empty());
}

}  // namespace
}  // namespace codebox::agent
