#include "base/base64.h"

#include <gtest/gtest.h>

namespace codebox::base {
namespace {

TEST(Base64DecodeTest, DecodesWithAndWithoutPadding) {
  EXPECT_EQ(*Base64Decode(""), "");
  EXPECT_EQ(*Base64Decode("Zg=="), "f");
  EXPECT_EQ(*Base64Decode("Zm8="), "fo");
  EXPECT_EQ(*Base64Decode("Zm9v"), "foo");
  EXPECT_EQ(*Base64Decode("Zm9vYg"), "foob");
  EXPECT_EQ(*Base64Decode("Zm9vYmE"), "fooba");
}

TEST(Base64DecodeTest, IsBinarySafeAndSkipsLineBreaks) {
  EXPECT_EQ(*Base64Decode("iVBORw0K\nGgo=\n"), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(*Base64Decode("AAD/"), std::string("\0\0\xff", 3));
}

TEST(Base64DecodeTest, RejectsWhatNoEncoderMakes) {
  EXPECT_FALSE(Base64Decode("Zm9v!").ok());
  EXPECT_FALSE(Base64Decode("Z").ok());
  EXPECT_FALSE(Base64Decode("Zg=a").ok());
  EXPECT_FALSE(Base64Decode("=Zg").ok());
  EXPECT_FALSE(Base64Decode("Zg===").ok());
}

}  // namespace
}  // namespace codebox::base
