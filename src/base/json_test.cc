#include "base/json.h"

#include <gtest/gtest.h>

#include <string>

#include "base/json_fields.h"

namespace codebox::base {
namespace {

std::string Nested(size_t depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}

TEST(ParseJsonTest, ParsesWithinTheBounds) {
  auto j = ParseJson(R"({"a": [1, {"b": "x"}]})");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["a"][1]["b"], "x");
  EXPECT_TRUE(ParseJson(Nested(64)).ok());
}

TEST(ParseJsonTest, RefusesDeepNestingWithoutRecursing) {
  // 200,000 deep: the attack that once overflowed the server's stack through dump().
  for (auto [open, close] : {std::pair{'[', ']'}, std::pair{'{', '}'}}) {
    std::string deep = open == '[' ? Nested(200'000) : std::string();
    if (open == '{') {
      for (int i = 0; i < 200'000; ++i) deep += "{\"a\":";
      deep += "1" + std::string(200'000, '}');
    }
    auto j = ParseJson(deep, {}, "the request body");
    ASSERT_FALSE(j.ok());
    EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(j.status().message().find("more than 64 deep"), std::string::npos);
    EXPECT_NE(j.status().message().find("the request body"), std::string::npos);
  }
  EXPECT_FALSE(ParseJson(Nested(65)).ok());
  // Brackets inside strings do not count, escaped quotes do not end a string.
  EXPECT_TRUE(ParseJson("[\"" + std::string(1000, '[') + "\\\"[[\"]").ok());
}

TEST(ParseJsonTest, RefusesLargeTextAndNamesTheBound) {
  auto j = ParseJson("[" + std::string(100, ' ') + "]", {.max_bytes = 50}, "the answer");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("at most 50"), std::string::npos);
}

TEST(ParseJsonTest, ErrorsNameThePlaceNotTheInput) {
  const std::string secret = "SECRET-CLIENT-BYTES";
  auto j = ParseJson("{\"a\": " + secret + "}");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("not valid JSON (byte"), std::string::npos);
  EXPECT_EQ(j.status().message().find("SECRET"), std::string::npos) << j.status().message();
  // Invalid UTF-8 in a string is not JSON.
  EXPECT_FALSE(ParseJson("\"\xff\xfe\"").ok());
}

TEST(JsonExcerptTest, IsShortWhateverTheValue) {
  nlohmann::json big = nlohmann::json::array();
  for (int i = 0; i < 100'000; ++i) big.push_back(i);
  EXPECT_LE(JsonExcerpt(big).size(), 64u + 3);
  EXPECT_EQ(JsonExcerpt(nlohmann::json(7)), "7");
  EXPECT_LE(JsonExcerpt(nlohmann::json(std::string(1 << 20, 'x'))).size(), 64u + 3);
  EXPECT_EQ(JsonExcerpt(nlohmann::json("ab")), "\"ab\"");
  // Never cut inside a UTF-8 sequence.
  std::string e = Excerpt("\xc3\xa9\xc3\xa9\xc3\xa9", 3);
  EXPECT_EQ(e, "\xc3\xa9...");
}

TEST(JsonFieldsTest, NumbersAreFiniteAndInRange) {
  const nlohmann::json j = {{"a", 1.5}, {"b", 7}, {"c", "x"}, {"d", 101}};
  JsonFields f(j, "load");
  EXPECT_EQ(*f.Number("a", 0, 100), 1.5);
  EXPECT_EQ(*f.Number("b", 0, 100), 7);
  EXPECT_EQ(f.Number("c", 0, 100).status().message(), "load: field \"c\" is not a number");
  EXPECT_EQ(f.Number("d", 0, 100).status().code(), StatusCode::kProtocolError);
  EXPECT_EQ(*f.Number("e", 0, 100, 2.0), 2.0);
  EXPECT_EQ(f.Number("e", 0, 100).status().code(), StatusCode::kProtocolError);
}

TEST(JsonFieldsTest, ObjectsAreAnArrayOfObjects) {
  const nlohmann::json j = {{"list", {{{"x", 1}}, {{"x", 2}}}}, {"mixed", {1, {{"x", 1}}}}};
  JsonFields f(j, "answer");
  auto list = f.Objects("list", 2, true);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*(*list)[1])["x"], 2);
  EXPECT_FALSE(f.Objects("list", 1, true).ok()) << "more than max_items";
  EXPECT_FALSE(f.Objects("mixed", 9, true).ok());
  EXPECT_FALSE(f.Objects("none", 9, true).ok());
  EXPECT_TRUE(f.Objects("none", 9, false)->empty());
}

}  // namespace
}  // namespace codebox::base
