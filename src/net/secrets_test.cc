#include "net/secrets.h"

#include <gtest/gtest.h>

#include "base/text.h"

namespace codebox::net {
namespace {

SecretInjector Injector() {
  auto injector = SecretInjector::Make({
      {.name = "WEATHER", .value = "w-123&x", .hosts = {"api.weather.test"}},
      {.name = "OTHER", .value = "o-456", .hosts = {"*.other.test:8443"}},
  });
  EXPECT_TRUE(injector.ok()) << injector.status().message();
  return *injector;
}

std::string Head(std::string_view target, std::string_view headers = "") {
  return "GET " + std::string(target) + " HTTP/1.1\r\nHost: x\r\n" + std::string(headers) + "\r\n";
}

TEST(SecretInjectorTest, KnowsEachSecretsHosts) {
  SecretInjector injector = Injector();
  EXPECT_TRUE(injector.IsSecretHost("api.weather.test", 443));
  EXPECT_TRUE(injector.IsSecretHost("API.Weather.Test.", 80));
  EXPECT_FALSE(injector.IsSecretHost("api.weather.test", 8443));
  EXPECT_TRUE(injector.IsSecretHost("a.other.test", 8443));
  EXPECT_FALSE(injector.IsSecretHost("other.test", 8443));
  EXPECT_FALSE(injector.IsSecretHost("evil.test", 443));
  EXPECT_FALSE(SecretInjector().IsSecretHost("api.weather.test", 443));
}

TEST(SecretInjectorTest, PutsValuesInHeadersAndPercentEncodedInTheTarget) {
  SecretInjector injector = Injector();
  std::vector<std::string> injected;
  auto head =
      injector.Rewrite(Head("/v1?key=%3CCODEBOX_SECRET%3AWEATHER%3E&raw=<CODEBOX_SECRET:WEATHER>",
                            "Authorization: Bearer <CODEBOX_SECRET:WEATHER>\r\nX-Api-Key: "
                            "<CODEBOX_SECRET:WEATHER>\r\nX-Unknown: <CODEBOX_SECRET:NOPE>\r\n"),
                       "api.weather.test", 443, &injected);
  ASSERT_TRUE(head.ok()) << head.status().message();
  EXPECT_EQ(*head, Head("/v1?key=w-123%26x&raw=w-123%26x",
                        "Authorization: Bearer w-123&x\r\nX-Api-Key: w-123&x\r\nX-Unknown: "
                        "<CODEBOX_SECRET:NOPE>\r\n"));
  EXPECT_EQ(injected, std::vector<std::string>{"WEATHER"});
}

TEST(SecretInjectorTest, PutsValuesInBasicCredentials) {
  SecretInjector injector = Injector();
  std::vector<std::string> injected;
  const std::string basic = base::EncodeBase64("user:<CODEBOX_SECRET:WEATHER>");
  auto head = injector.Rewrite(Head("/", "authorization: Basic " + basic + "\r\n"),
                               "api.weather.test", 80, &injected);
  ASSERT_TRUE(head.ok()) << head.status().message();
  EXPECT_EQ(*head,
            Head("/", "Authorization: Basic " + base::EncodeBase64("user:w-123&x") + "\r\n"));
  EXPECT_EQ(injected, std::vector<std::string>{"WEATHER"});
}

TEST(SecretInjectorTest, RefusesAPlaceholderBoundForAnotherHost) {
  SecretInjector injector = Injector();
  std::vector<std::string> injected;
  for (const std::string& head :
       {Head("/?k=%3cCODEBOX_SECRET%3aWEATHER%3e"),  // lower-case hex is the same placeholder
        Head("/?k=%3CCODEBOX_SECRET:WEATHER%3E"),
        Head("/", "X-Api-Key: <CODEBOX_SECRET:WEATHER>\r\n"),
        Head("/", "Authorization: Basic " + base::EncodeBase64("u:<CODEBOX_SECRET:WEATHER>") +
                      "\r\n")}) {
    auto rewritten = injector.Rewrite(head, "evil.test", 443, &injected);
    ASSERT_FALSE(rewritten.ok()) << head;
    EXPECT_EQ(rewritten.status().code(), StatusCode::kPermissionDenied);
    EXPECT_NE(rewritten.status().message().find("secret WEATHER, which may be sent only to "
                                                "api.weather.test"),
              std::string::npos)
        << rewritten.status().message();
    EXPECT_EQ(rewritten.status().message().find("w-123"), std::string::npos);
  }
  // The right name on the wrong port is another host too.
  EXPECT_FALSE(
      injector.Rewrite(Head("/", "X: <CODEBOX_SECRET:OTHER>\r\n"), "a.other.test", 443, &injected)
          .ok());
  EXPECT_TRUE(injected.empty());
}

TEST(PlaceholderScannerTest, SeesAStartSplitAcrossChunks) {
  const std::string text = "body ... <CODEBOX_SECRET:KEY> ...";
  for (size_t split = 0; split <= text.size(); ++split) {
    PlaceholderScanner scanner;
    const bool first = scanner.Feed(std::string_view(text).substr(0, split));
    const bool second = scanner.Feed(std::string_view(text).substr(split));
    EXPECT_TRUE(first || second) << split;
  }
  PlaceholderScanner encoded;
  EXPECT_TRUE(encoded.Feed("k=%3CCODEBOX_SECRET%3") || encoded.Feed("aKEY%3E"));
  PlaceholderScanner clean;
  EXPECT_FALSE(clean.Feed("CODEBOX_SECRE"));
  EXPECT_FALSE(clean.Feed("T is just a word; "));
  EXPECT_FALSE(clean.Feed(std::string(100000, 'x')));
}

}  // namespace
}  // namespace codebox::net
