#include "codebox/status.h"

#include <gtest/gtest.h>

namespace codebox {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument(std::to_string(x) + " is odd");
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(StatusTest, OkAndErrors) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = NotFound("image python");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "not_found: image python");
  EXPECT_EQ(s.WithContext("create box").message(), "create box: image python");
  EXPECT_EQ(s.WithContext("x").code(), StatusCode::kNotFound);
}

TEST(StatusTest, WithContextSaysAContextOnce) {
  Status s = IoError("mkdir /etc/x: Read-only file system");
  EXPECT_EQ(s.WithContext("mkdir /etc/x").message(), "mkdir /etc/x: Read-only file system");
  EXPECT_EQ(s.WithContext("mkdir /etc/x").WithContext("mkdir /etc/x").message(),
            "mkdir /etc/x: Read-only file system");
  EXPECT_EQ(s.WithContext("copy in").WithContext("mkdir /etc/x").message(),
            "mkdir /etc/x: copy in: mkdir /etc/x: Read-only file system");
  // Only a whole leading context counts: "mkdir /etc" is not "mkdir /etc/x".
  EXPECT_EQ(s.WithContext("mkdir /etc").message(),
            "mkdir /etc: mkdir /etc/x: Read-only file system");
  EXPECT_EQ(IoError("mkdir /etc/x").WithContext("mkdir /etc/x").message(), "mkdir /etc/x");
  EXPECT_EQ(s.WithContext("").message(), s.message());
  EXPECT_EQ(s.WithContext("mkdir /etc/x").code(), StatusCode::kIoError);
  EXPECT_TRUE(Status::Ok().WithContext("x").ok());
}

TEST(StatusTest, AssignOrReturnPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  auto r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "3 is odd");
}

TEST(StatusTest, StatusOrFromOkStatusIsInternalError) {
  StatusOr<int> r(Status::Ok());
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace codebox
