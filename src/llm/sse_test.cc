#include "llm/sse.h"

#include <gtest/gtest.h>

#include <vector>

namespace codebox::llm {
namespace {

std::vector<SseEvent> ParseInPieces(std::string_view stream, size_t piece) {
  SseParser parser;
  std::vector<SseEvent> events;
  auto collect = [&](const SseEvent& e) { events.push_back(e); };
  for (size_t i = 0; i < stream.size(); i += piece) parser.Feed(stream.substr(i, piece), collect);
  parser.Finish(collect);
  return events;
}

TEST(SseParserTest, EventsSurviveAnySplitAndLineEnding) {
  const std::string stream =
      ": keep-alive\r\n\r\ndata: {\"a\":1}\r\n\r\nevent: error\ndata: x\ndata:y\n\ndata: [DONE]\r\r";
  for (size_t piece : {1u, 2u, 3u, 7u, 1000u}) {
    auto events = ParseInPieces(stream, piece);
    ASSERT_EQ(events.size(), 3u) << "piece " << piece;
    EXPECT_EQ(events[0].data, "{\"a\":1}");
    EXPECT_EQ(events[1].event, "error");
    EXPECT_EQ(events[1].data, "x\ny");  // data lines join with \n; "data:y" has no space
    EXPECT_EQ(events[2].data, "[DONE]");
  }
}

TEST(SseParserTest, LastEventWithoutBlankLineIsDeliveredAtFinish) {
  auto events = ParseInPieces("data: one\n\ndata: two", 4);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].data, "two");
}

TEST(SseParserTest, CommentsAndUnknownFieldsAreNotEvents) {
  auto events = ParseInPieces(": ping\n\nid: 3\nretry: 10\n\n", 5);
  EXPECT_TRUE(events.empty());
}

}  // namespace
}  // namespace codebox::llm
