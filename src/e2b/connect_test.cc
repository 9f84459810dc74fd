#include "e2b/connect.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace codebox::e2b::connect {
namespace {

using nlohmann::json;

TEST(ConnectCodesTest, NamesAndHttpStatusesAreTheProtocols) {
  struct Row {
    Code code;
    const char* name;
    int http;
  };
  const Row rows[] = {
      {Code::kCanceled, "canceled", 499},
      {Code::kUnknown, "unknown", 500},
      {Code::kInvalidArgument, "invalid_argument", 400},
      {Code::kDeadlineExceeded, "deadline_exceeded", 504},
      {Code::kNotFound, "not_found", 404},
      {Code::kAlreadyExists, "already_exists", 409},
      {Code::kPermissionDenied, "permission_denied", 403},
      {Code::kResourceExhausted, "resource_exhausted", 429},
      {Code::kFailedPrecondition, "failed_precondition", 400},
      {Code::kAborted, "aborted", 409},
      {Code::kOutOfRange, "out_of_range", 400},
      {Code::kUnimplemented, "unimplemented", 501},
      {Code::kInternal, "internal", 500},
      {Code::kUnavailable, "unavailable", 503},
      {Code::kDataLoss, "data_loss", 500},
      {Code::kUnauthenticated, "unauthenticated", 401},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(CodeName(row.code), row.name);
    EXPECT_EQ(HttpStatus(row.code), row.http) << row.name;
  }
}

TEST(ConnectCodesTest, EveryCodeboxErrorHasAMeaning) {
  for (int c = 1; c <= static_cast<int>(StatusCode::kLastStatusCode); ++c) {
    EXPECT_NE(CodeFor(static_cast<StatusCode>(c)), Code::kUnknown)
        << StatusCodeName(static_cast<StatusCode>(c));
  }
  // A box that is gone reads as a sandbox that is not running.
  EXPECT_EQ(CodeFor(StatusCode::kBoxCrashed), Code::kUnavailable);
  EXPECT_EQ(CodeFor(StatusCode::kBoxLost), Code::kUnavailable);
  EXPECT_EQ(CodeFor(StatusCode::kLimitExceeded), Code::kResourceExhausted);
}

TEST(ConnectErrorTest, IsCodeAndMessageWithTheMessageEscaped) {
  json j = json::parse(ErrorJson(Code::kNotFound, "no \"x\"\n\xff"));
  EXPECT_EQ(j["code"], "not_found");
  EXPECT_EQ(j["message"], "no \"x\"\n\xEF\xBF\xBD");  // invalid UTF-8 replaced, never thrown
  EXPECT_EQ(j.size(), 2u);
}

TEST(ConnectEnvelopeTest, IsFlagsBigEndianLengthAndPayload) {
  const std::string e = Envelope("{\"a\":1}");
  ASSERT_EQ(e.size(), 5u + 7u);
  EXPECT_EQ(e[0], '\0');
  EXPECT_EQ(std::string(e.data() + 1, 4), std::string("\0\0\0\x07", 4));
  EXPECT_EQ(e.substr(5), "{\"a\":1}");
  const std::string big = Envelope(std::string(0x010203, 'x'));
  EXPECT_EQ(std::string(big.data() + 1, 4), std::string("\0\x01\x02\x03", 4));
}

TEST(ConnectEnvelopeTest, EndOfStreamIsEmptyOnSuccessAndCarriesTheError) {
  const std::string ok = EndOfStream(Status::Ok());
  EXPECT_EQ(ok, std::string("\x02\0\0\0\x02{}", 7));
  const std::string failed = EndOfStream(DeadlineExceeded("the command ran past 60 s"));
  ASSERT_GT(failed.size(), 5u);
  EXPECT_EQ(failed[0], '\x02');
  json j = json::parse(failed.substr(5));
  EXPECT_EQ(j["error"]["code"], "deadline_exceeded");
  EXPECT_EQ(j["error"]["message"], "the command ran past 60 s");
}

TEST(ConnectEnvelopeTest, ASingleEnvelopeReadsBackItsPayload) {
  const std::string body = Envelope("{\"process\":{\"cmd\":\"ls\"}}");
  auto payload = SingleEnvelope(body, 1024);
  ASSERT_TRUE(payload.ok()) << payload.status().ToString();
  EXPECT_EQ(*payload, "{\"process\":{\"cmd\":\"ls\"}}");
  auto empty = SingleEnvelope(Envelope(""), 1024);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, "");
}

// What a hostile client may send as a streaming request's body.
TEST(ConnectEnvelopeTest, AnyOtherBodyIsRefusedWithWhatWasWrong) {
  const std::string one = Envelope("{}");
  struct Case {
    std::string body;
    const char* says;
  };
  const Case cases[] = {
      {"", "shorter than an envelope"},
      {std::string("\0\0\0", 3), "shorter than an envelope"},
      {"\x01" + one.substr(1), "compressed"},
      {"\x02" + one.substr(1), "flags 2"},
      {"\x80" + one.substr(1), "flags 128"},
      {one + one, "but 9 follow"},                      // two messages
      {one.substr(0, one.size() - 1), "but 1 follow"},  // cut short
      {std::string("\0\xff\xff\xff\xff", 5) + "{}", "more than the 1024"},
  };
  for (const Case& c : cases) {
    auto payload = SingleEnvelope(c.body, 1024);
    ASSERT_FALSE(payload.ok()) << c.says;
    EXPECT_EQ(payload.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(payload.status().message().find(c.says), std::string::npos)
        << payload.status().ToString();
  }
}

TEST(ConnectContentTypeTest, TakesParametersAndAnyCase) {
  EXPECT_TRUE(IsStreamContentType("application/connect+json"));
  EXPECT_TRUE(IsStreamContentType("application/connect+json; charset=utf-8"));
  EXPECT_TRUE(IsStreamContentType("Application/Connect+JSON"));
  EXPECT_FALSE(IsStreamContentType("application/json"));
  EXPECT_FALSE(IsStreamContentType("application/connect+proto"));
  EXPECT_FALSE(IsStreamContentType("application/connect+jsonx"));
  EXPECT_FALSE(IsStreamContentType(""));
}

}  // namespace
}  // namespace codebox::e2b::connect
