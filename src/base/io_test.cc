#include "base/io.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace codebox::base {
namespace {

TEST(IoTest, SocketPairCarriesBytes) {
  auto pair = SocketPair();
  ASSERT_TRUE(pair.ok());
  ASSERT_TRUE(WriteAll(pair->first.get(), "hello").ok());
  char buf[5];
  ASSERT_TRUE(ReadExact(pair->second.get(), buf, 5).ok());
  EXPECT_EQ(std::string(buf, 5), "hello");
  pair->first.reset();
  Status eof = ReadExact(pair->second.get(), buf, 1);
  EXPECT_FALSE(eof.ok());
  EXPECT_NE(eof.message().find("end of stream"), std::string::npos);
}

TEST(IoTest, FilesRoundTripAndErrorsNameThePath) {
  std::string path = ::testing::TempDir() + "/io_test_file";
  ASSERT_TRUE(WriteFile(path, "data", /*atomic=*/true).ok());
  auto back = ReadFile(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, "data");
  ::unlink(path.c_str());
  auto missing = ReadFile("/nonexistent/x");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/x"), std::string::npos);
}

}  // namespace
}  // namespace codebox::base
