#include "base/sse.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace codebox::base {
namespace {

using Event = std::pair<std::string, std::string>;  // name, data

std::vector<Event> ParseInPieces(std::string_view stream, size_t piece) {
  SseParser parser;
  std::vector<Event> events;
  auto collect = [&](std::string_view e, std::string_view d) {
    events.emplace_back(e, d);
    return Status::Ok();
  };
  for (size_t i = 0; i < stream.size(); i += piece) {
    EXPECT_TRUE(parser.Feed(stream.substr(i, piece), collect).ok());
  }
  EXPECT_TRUE(parser.Finish(collect).ok());
  return events;
}

TEST(SseParserTest, EventsSurviveAnySplitAndLineEnding) {
  const std::string stream =
      ": keep-alive\r\n\r\ndata: {\"a\":1}\r\n\r\nevent: error\ndata: x\ndata:y\n\ndata: [DONE]\r\r";
  for (size_t piece : {1u, 2u, 3u, 7u, 1000u}) {
    auto events = ParseInPieces(stream, piece);
    ASSERT_EQ(events.size(), 3u) << "piece " << piece;
    EXPECT_EQ(events[0], Event("message", "{\"a\":1}"));
    EXPECT_EQ(events[1], Event("error", "x\ny"));  // data lines join with \n; "data:y" has no space
    EXPECT_EQ(events[2], Event("message", "[DONE]"));
  }
}

TEST(SseParserTest, LastEventWithoutBlankLineIsDeliveredAtFinish) {
  auto events = ParseInPieces("data: one\n\ndata: two", 4);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].second, "two");
}

TEST(SseParserTest, CommentsAndUnknownFieldsAreNotEvents) {
  EXPECT_TRUE(ParseInPieces(": ping\n\nid: 3\nretry: 10\n\n", 5).empty());
}

TEST(SseParserTest, ANamedEventWithAnEmptyDataLineIsDelivered) {
  auto events = ParseInPieces("id: 7\nevent:done\ndata\n\nevent: stdout\ndata: {\"text\": \"a\"}\n\n", 1);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], Event("done", ""));
  EXPECT_EQ(events[1], Event("stdout", "{\"text\": \"a\"}"));
}

TEST(SseParserTest, OneEventIsCappedAndALineWithoutEndToo) {
  auto ignore = [](std::string_view, std::string_view) { return Status::Ok(); };
  SseParser small(10);
  EXPECT_EQ(small.Feed("data: 0123456789abcdef\n", ignore).code(), StatusCode::kLimitExceeded);
  SseParser endless(10);
  EXPECT_EQ(endless.Feed(std::string(11, 'x'), ignore).code(), StatusCode::kLimitExceeded);
  SseParser many_lines(10);
  Status s = Status::Ok();
  for (int i = 0; i < 10 && s.ok(); ++i) s = many_lines.Feed("data: ab\n", ignore);
  EXPECT_EQ(s.code(), StatusCode::kLimitExceeded);
}

TEST(SseParserTest, TheCallbacksErrorStopsTheParse) {
  SseParser parser;
  int calls = 0;
  Status s = parser.Feed("data: 1\n\ndata: 2\n\n", [&](std::string_view, std::string_view) {
    ++calls;
    return ProtocolError("no");
  });
  EXPECT_EQ(s.code(), StatusCode::kProtocolError);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace codebox::base
