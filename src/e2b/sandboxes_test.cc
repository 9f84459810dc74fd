#include "e2b/sandboxes.h"

#include <gtest/gtest.h>

namespace codebox::e2b {
namespace {

using nlohmann::json;

// What E2B's JS SDK 2.x sends for Sandbox.create with metadata, envs and a timeout.
TEST(NewSandboxTest, ReadsWhatTheSdkSends) {
  json body = {{"templateID", "code-interpreter-v1"},
               {"metadata", {{"k", "v w"}}},
               {"envVars", {{"FOO", "bar"}}},
               {"timeout", 121},
               {"allow_internet_access", false},
               {"network", {{"allowOut", {"pypi.org"}}, {"denyOut", {"10.0.0.0/8"}}}},
               {"secure", true},
               {"aFieldOfALaterSdk", {{"x", 1}}}};
  auto s = NewSandboxFromJson(body);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->template_id, "code-interpreter-v1");
  EXPECT_EQ(s->timeout_s, 121);
  EXPECT_EQ(s->metadata.at("k"), "v w");
  EXPECT_EQ(s->env_vars.at("FOO"), "bar");
  EXPECT_EQ(s->allow_internet_access, false);
  EXPECT_EQ(s->allow_out, std::vector<std::string>{"pypi.org"});
  EXPECT_EQ(s->deny_out, std::vector<std::string>{"10.0.0.0/8"});

  auto minimal = NewSandboxFromJson({{"templateID", "base"}});
  ASSERT_TRUE(minimal.ok()) << minimal.status().ToString();
  EXPECT_EQ(minimal->timeout_s, std::nullopt);
  EXPECT_EQ(minimal->allow_internet_access, std::nullopt);
  EXPECT_TRUE(minimal->metadata.empty());
}

TEST(NewSandboxTest, RefusesWrongTypesSizesAndWhatCodeboxDoesNotDo) {
  const std::string big(5000, 'x');
  json many = json::object();
  for (int i = 0; i < 300; ++i) many["k" + std::to_string(i)] = "v";
  struct Case {
    json body;
    const char* says;
  };
  const Case cases[] = {
      {json::array(), "not a JSON object"},
      {json::object(), "missing field \"templateID\""},
      {{{"templateID", 7}}, "\"templateID\" is not a string"},
      {{{"templateID", ""}}, "\"templateID\" is empty"},
      {{{"templateID", "base"}, {"timeout", 0}}, "\"timeout\""},
      {{{"templateID", "base"}, {"timeout", -5}}, "\"timeout\""},
      {{{"templateID", "base"}, {"timeout", "60"}}, "\"timeout\""},
      {{{"templateID", "base"}, {"metadata", {{"k", 1}}}}, "not a string"},
      {{{"templateID", "base"}, {"metadata", "k=v"}}, "not an object"},
      {{{"templateID", "base"}, {"metadata", {{"k", big}}}}, "longer than 4096"},
      {{{"templateID", "base"}, {"envVars", many}}, "more than 256 entries"},
      {{{"templateID", "base"}, {"allow_internet_access", "yes"}}, "not a bool"},
      {{{"templateID", "base"}, {"network", {{"allowOut", {1}}}}}, "allowOut"},
      {{{"templateID", "base"}, {"network", {{"egressProxy", {{"address", "p:1"}}}}}},
       "network.egressProxy is not supported"},
      {{{"templateID", "base"}, {"autoPause", true}}, "autoPause) is not supported"},
      {{{"templateID", "base"}, {"volumeMounts", {{{"name", "v"}, {"path", "/v"}}}}},
       "volumeMounts is not supported"},
  };
  for (const Case& c : cases) {
    auto s = NewSandboxFromJson(c.body);
    ASSERT_FALSE(s.ok()) << c.body.dump();
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(c.says), std::string::npos)
        << c.says << " in " << s.status().ToString();
  }
}

TEST(SandboxAnswerTest, HasTheFieldsTheSdkReads) {
  json j = SandboxAnswerToJson({.sandbox_id = "b-1",
                                .template_id = "base",
                                .envd_version = "0.5.7",
                                .envd_access_token = "t"});
  EXPECT_EQ(j["sandboxID"], "b-1");
  EXPECT_EQ(j["templateID"], "base");
  EXPECT_EQ(j["envdVersion"], "0.5.7");
  EXPECT_EQ(j["envdAccessToken"], "t");
  EXPECT_TRUE(j.contains("clientID"));
  EXPECT_EQ(ErrorBody(404, "sandbox b-1 not found"),
            json({{"code", 404}, {"message", "sandbox b-1 not found"}}));
}

// The SDK's {'a b': 'c&d', k: 'v'} as the HTTP layer hands it over after its one decoding.
TEST(MetadataFilterTest, UndoesTheSdksTwoEncodings) {
  auto m = MetadataFilterFromQuery("a%2520b=c%2526d&k=v");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*m, (std::map<std::string, std::string>{{"a b", "c&d"}, {"k", "v"}}));
  auto empty = MetadataFilterFromQuery("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  EXPECT_FALSE(MetadataFilterFromQuery("novalue").ok());
  EXPECT_FALSE(MetadataFilterFromQuery("k=%zz").ok());
  EXPECT_FALSE(MetadataFilterFromQuery("=v").ok());
  std::string many;
  for (int i = 0; i < 300; ++i) many += "k" + std::to_string(i) + "=v&";
  EXPECT_FALSE(MetadataFilterFromQuery(many).ok());
}

TEST(SandboxesTest, AMetricIsE2bsSandboxMetricInBytes) {
  SandboxMetric m{.at = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000)),
                  .cpu_count = 2,
                  .cpu_used_pct = 12.5,
                  .mem_used = 5u << 20,
                  .mem_cache = 1u << 20,
                  .mem_total = 512u << 20,
                  .disk_used = 1u << 20,
                  .disk_total = 256u << 20};
  nlohmann::json j = SandboxMetricToJson(m);
  EXPECT_EQ(j["timestamp"], "2023-11-14T22:13:20.000Z");
  EXPECT_EQ(j["timestampUnix"], 1'700'000'000);
  EXPECT_EQ(j["cpuCount"], 2);
  EXPECT_EQ(j["cpuUsedPct"], 12.5);
  EXPECT_EQ(j["memUsed"], 5u << 20);
  EXPECT_EQ(j["memCache"], 1u << 20);
  EXPECT_EQ(j["memTotal"], 512u << 20);
  EXPECT_EQ(j["diskUsed"], 1u << 20);
  EXPECT_EQ(j["diskTotal"], 256u << 20);
}

}  // namespace
}  // namespace codebox::e2b
