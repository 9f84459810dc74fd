#include "net/proxy_request.h"

#include <gtest/gtest.h>

#include <string>

namespace codebox::net {
namespace {

constexpr size_t kMax = 8 << 10;

ProxyRequest Parsed(std::string_view bytes) {
  auto r = ParseProxyRequest(bytes, kMax);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok() || !*r) {
    ADD_FAILURE() << "no complete request in: " << bytes;
    return {};
  }
  return **r;
}

TEST(ProxyRequestTest, ConnectNamesHostAndPort) {
  ProxyRequest r = Parsed("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n");
  EXPECT_TRUE(r.tunnel);
  EXPECT_EQ(r.host, "pypi.org");
  EXPECT_EQ(r.port, 443);
  EXPECT_TRUE(r.upstream_head.empty());
  ProxyRequest v6 = Parsed("CONNECT [fd00::1]:8443 HTTP/1.1\r\n\r\n");
  EXPECT_EQ(v6.host, "fd00::1");
  EXPECT_EQ(v6.port, 8443);
}

TEST(ProxyRequestTest, AbsoluteUriBecomesOriginFormUpstream) {
  const std::string head =
      "POST http://Example.org:8080/a/b?x=1#frag HTTP/1.1\r\nHost: ignored.example\r\n"
      "Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n"
      "Connection: keep-alive\r\nContent-Length: 5\r\n\r\n";
  ProxyRequest r = Parsed(head + "hello");
  EXPECT_FALSE(r.tunnel);
  EXPECT_EQ(r.host, "Example.org") << "as written; the policy normalizes it";
  EXPECT_EQ(r.port, 8080);
  EXPECT_EQ(r.head_bytes, head.size()) << "the body follows as sent";
  EXPECT_EQ(r.upstream_head.rfind("POST /a/b?x=1 HTTP/1.1\r\n", 0), 0u) << r.upstream_head;
  EXPECT_NE(r.upstream_head.find("Host: Example.org:8080\r\n"), std::string::npos);
  EXPECT_NE(r.upstream_head.find("Connection: close\r\n"), std::string::npos);
  EXPECT_NE(r.upstream_head.find("Content-Length: 5\r\n"), std::string::npos);
  EXPECT_EQ(r.upstream_head.find("Proxy-"), std::string::npos) << r.upstream_head;
  EXPECT_EQ(r.upstream_head.find("keep-alive"), std::string::npos) << r.upstream_head;
  EXPECT_EQ(r.upstream_head.find("ignored.example"), std::string::npos);
  ProxyRequest bare = Parsed("GET http://example.org HTTP/1.1\r\n\r\n");
  EXPECT_EQ(bare.port, 80);
  EXPECT_EQ(bare.upstream_head.rfind("GET / HTTP/1.1\r\n", 0), 0u) << bare.upstream_head;
}

TEST(ProxyRequestTest, AnIncompleteHeadAsksForMore) {
  for (std::string_view part : {"", "CONN", "CONNECT pypi.org:443 HTTP/1.1\r\n",
                                "GET http://example.org/ HTTP/1.1\r\nHost: x\r\n"}) {
    auto r = ParseProxyRequest(part, kMax);
    ASSERT_TRUE(r.ok()) << part << ": " << r.status().ToString();
    EXPECT_FALSE(r->has_value()) << part;
  }
}

TEST(ProxyRequestTest, RefusesWhatIsNotAProxyRequest) {
  for (std::string_view bad : {
           "GET /index.html HTTP/1.1\r\nHost: example.org\r\n\r\n",  // origin form
           "GET https://example.org/ HTTP/1.1\r\n\r\n",              // https without CONNECT
           "GET ftp://example.org/ HTTP/1.1\r\n\r\n",                // another scheme
           "CONNECT pypi.org HTTP/1.1\r\n\r\n",                      // no port
           "CONNECT pypi.org:99999 HTTP/1.1\r\n\r\n",                // bad port
           "GET http://user:pw@example.org/ HTTP/1.1\r\n\r\n",       // credentials
           "GET http:///path HTTP/1.1\r\n\r\n",                      // no host
           "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 TLS hello\r\n\r\n",  // not HTTP at all
           "GET http://example.org/ HTTP/1.1\r\nBad Header\r\n\r\n",
       }) {
    auto r = ParseProxyRequest(bad, kMax);
    EXPECT_FALSE(r.ok()) << "accepted: " << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
}

TEST(ProxyRequestTest, AHeadPastTheLimitIsRefusedNotBuffered) {
  std::string huge = "GET http://example.org/ HTTP/1.1\r\nX-Pad: " + std::string(kMax, 'a');
  auto r = ParseProxyRequest(huge, kMax);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  auto done = ParseProxyRequest(huge + "\r\n\r\n", kMax);
  ASSERT_FALSE(done.ok());
  EXPECT_EQ(done.status().code(), StatusCode::kResourceExhausted);
}

TEST(ProxyRequestTest, RefusalIsAWholeHttpAnswerWithSafeText) {
  std::string answer = ProxyRefusal(403, "evil.com:443 is not allowed\x1b[31m");
  EXPECT_EQ(answer.rfind("HTTP/1.1 403 Forbidden\r\n", 0), 0u);
  EXPECT_NE(answer.find("Connection: close\r\n"), std::string::npos);
  EXPECT_EQ(answer.find('\x1b'), std::string::npos) << "escape codes from box text are shown";
  const size_t body_at = answer.find("\r\n\r\n") + 4;
  const size_t length_at = answer.find("Content-Length: ") + 16;
  EXPECT_EQ(std::stoul(answer.substr(length_at)), answer.size() - body_at);
}

}  // namespace
}  // namespace codebox::net
