#include "http/address.h"

#include <gtest/gtest.h>

namespace codebox::http {
namespace {

TEST(AddressTest, ParsesEveryForm) {
  auto u = ParseAddress("unix:/run/codebox/codebox.sock");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->kind, Address::Kind::kUnix);
  EXPECT_EQ(u->path, "/run/codebox/codebox.sock");
  EXPECT_EQ(u->ToString(), "unix:/run/codebox/codebox.sock");

  auto h = ParseAddress("http://127.0.0.1:8080/");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->kind, Address::Kind::kTcp);
  EXPECT_EQ(h->host, "127.0.0.1");
  EXPECT_EQ(h->port, 8080);
  EXPECT_EQ(h->ToString(), "127.0.0.1:8080");

  auto v6 = ParseAddress("[::1]:9");
  ASSERT_TRUE(v6.ok()) << v6.status().ToString();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 9);
  EXPECT_EQ(v6->ToString(), "[::1]:9");

  auto l = ParseAddress("localhost:0");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->host, "localhost");
  EXPECT_EQ(l->port, 0);
}

TEST(AddressTest, RejectsBadForms) {
  for (const char* bad : {"", "unix:relative.sock", "127.0.0.1", "127.0.0.1:99999", "::1:80",
                          "[::1]80", "[nothost]:80", "https://a:1", "a b:80", ":80", "h:-1"}) {
    auto a = ParseAddress(bad);
    EXPECT_FALSE(a.ok()) << bad;
    if (!a.ok()) {
      EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(a.status().message().find("unix:/abs/path.sock"), std::string::npos);
    }
  }
}

TEST(AddressTest, Loopback) {
  auto loop = [](const char* text) { return ParseAddress(text)->IsLoopback(); };
  EXPECT_TRUE(loop("unix:/tmp/x.sock"));
  EXPECT_TRUE(loop("127.0.0.1:1"));
  EXPECT_TRUE(loop("127.200.3.4:1"));
  EXPECT_TRUE(loop("localhost:1"));
  EXPECT_TRUE(loop("[::1]:1"));
  EXPECT_TRUE(loop("[::ffff:127.0.0.1]:1"));
  EXPECT_FALSE(loop("0.0.0.0:1"));
  EXPECT_FALSE(loop("10.0.0.1:1"));
  EXPECT_FALSE(loop("[::]:1"));
  EXPECT_FALSE(loop("example.org:1"));
  EXPECT_FALSE(loop("128.0.0.1:1"));
}

TEST(AddressTest, DefaultSocketPath) {
  if (geteuid() == 0) {
    EXPECT_EQ(DefaultSocketPath(), "/run/codebox/codebox.sock");
  } else {
    EXPECT_NE(DefaultSocketPath().find("codebox"), std::string::npos);
  }
}

}  // namespace
}  // namespace codebox::http
