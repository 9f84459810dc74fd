#include "protocol/message.h"

#include <gtest/gtest.h>

namespace codebox::protocol {
namespace {

TEST(MessageTest, ParsesObjects) {
  auto m = ParseControl(R"({"op":"exec","timeout_ms":1000,"pty":false})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*GetString(*m, "op"), "exec");
  EXPECT_EQ(*GetInt(*m, "timeout_ms"), 1000);
  EXPECT_FALSE(*GetBool(*m, "pty"));
  EXPECT_EQ(*GetInt(*m, "absent", 5), 5);
}

TEST(MessageTest, RejectsBadJsonAndNonObjects) {
  auto bad = ParseControl("{\"op\":");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kProtocolError);
  EXPECT_NE(bad.status().message().find("bad JSON"), std::string::npos);
  auto array = ParseControl("[1,2]");
  ASSERT_FALSE(array.ok());
  EXPECT_NE(array.status().message().find("not a JSON object"), std::string::npos);
  EXPECT_FALSE(ParseControl(std::string("\xff\xfe", 2)).ok());
}

TEST(MessageTest, FieldErrorsNameTheField) {
  auto m = ParseControl(R"({"path":3})");
  ASSERT_TRUE(m.ok());
  auto s = GetString(*m, "path");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("\"path\" is not a string"), std::string::npos);
  auto missing = GetInt(*m, "mode");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing field \"mode\""), std::string::npos);
}

TEST(MessageTest, DumpNeverThrowsOnInvalidUtf8) {
  Json j = {{"data", std::string("\xff\xfe", 2)}};
  std::string out = DumpControl(j);
  EXPECT_FALSE(out.empty());
  EXPECT_TRUE(ParseControl(out).ok());
}

}  // namespace
}  // namespace codebox::protocol
