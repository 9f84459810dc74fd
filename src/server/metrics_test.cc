// Metrics: the text is valid exposition format, line by line, and the numbers move.
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>
#include <thread>

namespace codebox::server {
namespace {

// name{labels} -> value, after checking every line against the 0.0.4 text format.
std::map<std::string, double> ParseExposition(const std::string& text) {
  static const std::regex kComment(R"(# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+)");
  static const std::regex kSample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\\n])*")"
      R"((,[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\\n])*")*\})? ([-+]?[0-9.e+-]+|\+Inf|NaN))");
  std::map<std::string, double> samples;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("#")) {
      EXPECT_TRUE(std::regex_match(line, kComment)) << "bad comment: " << line;
      continue;
    }
    std::smatch m;
    if (!std::regex_match(line, m, kSample)) {
      ADD_FAILURE() << "bad sample: " << line;
      continue;
    }
    const size_t space = line.rfind(' ');
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  EXPECT_TRUE(text.ends_with("\n"));
  return samples;
}

TEST(MetricsTest, EscapesLabelValues) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
}

TEST(MetricsTest, RendersValidTextAndCountsUp) {
  BoxRegistry registry(
      RegistryOptions{.max_boxes = 7, .pools = {*ParsePoolSpec("python=2,memory=256", {})}});
  Metrics metrics;
  metrics.ObserveRequest("POST", "/v1/run", 200, 0.004);
  metrics.ObserveRequest("GET", "/v1/boxes/{id}", 404, 0.0005);
  metrics.ObserveExec("run", 0.02);
  metrics.CountError("not_found");
  metrics.CountError("odd \"code\"\n");  // escaped, still one valid line
  auto first = ParseExposition(metrics.Render(registry));
  EXPECT_EQ(first[R"(codebox_requests_total{method="POST",route="/v1/run",status="200"})"], 1);
  EXPECT_EQ(first[R"(codebox_errors_total{code="not_found"})"], 1);
  EXPECT_EQ(first[R"(codebox_errors_total{code="odd \"code\"\n"})"], 1);
  EXPECT_EQ(first[R"(codebox_pool_target{pool="python=2,memory=256"})"], 2);
  EXPECT_EQ(first[R"(codebox_pool_ready{pool="python=2,memory=256"})"], 0);
  EXPECT_EQ(first[R"(codebox_pool_taken_total{pool="python=2,memory=256"})"], 0);
  EXPECT_EQ(first[R"(codebox_box_starts_total{result="ok"})"], 0);
  EXPECT_EQ(first["codebox_max_boxes"], 7);
  // Histogram buckets are cumulative and end with +Inf == count.
  EXPECT_EQ(first[R"(codebox_request_duration_seconds_bucket{route="/v1/run",le="0.0025"})"], 0);
  EXPECT_EQ(first[R"(codebox_request_duration_seconds_bucket{route="/v1/run",le="0.005"})"], 1);
  EXPECT_EQ(first[R"(codebox_request_duration_seconds_bucket{route="/v1/run",le="60"})"], 1);
  EXPECT_EQ(first[R"(codebox_request_duration_seconds_bucket{route="/v1/run",le="+Inf"})"], 1);
  EXPECT_EQ(first[R"(codebox_request_duration_seconds_count{route="/v1/run"})"], 1);
  EXPECT_DOUBLE_EQ(first[R"(codebox_request_duration_seconds_sum{route="/v1/run"})"], 0.004);
  EXPECT_EQ(first[R"(codebox_exec_duration_seconds_bucket{kind="run",le="0.01"})"], 0);
  EXPECT_EQ(first[R"(codebox_exec_duration_seconds_bucket{kind="run",le="0.025"})"], 1);

  // From many threads at once: nothing is lost.
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        metrics.ObserveRequest("POST", "/v1/run", 200, 100);  // past the last bucket
        metrics.ObserveExec("run", 0.02);
      }
    });
  }
  for (auto& t : threads) t.join();
  auto second = ParseExposition(metrics.Render(registry));
  EXPECT_EQ(second[R"(codebox_requests_total{method="POST",route="/v1/run",status="200"})"], 8001);
  EXPECT_EQ(second[R"(codebox_request_duration_seconds_bucket{route="/v1/run",le="60"})"], 1);
  EXPECT_EQ(second[R"(codebox_request_duration_seconds_bucket{route="/v1/run",le="+Inf"})"], 8001);
  EXPECT_EQ(second[R"(codebox_exec_duration_seconds_count{kind="run"})"], 8001);
}

// A method is the client's to choose (any token, on /healthz with no token too): one HTTP does
// not define is "other", so that no client can add series to the server's memory at will.
TEST(MetricsTest, MethodLabelIsBounded) {
  BoxRegistry registry(RegistryOptions{.max_boxes = 1});
  Metrics metrics;
  metrics.ObserveRequest("GET", "/healthz", 200, 0.001);
  for (int i = 0; i < 100; ++i) {
    metrics.ObserveRequest("X" + std::to_string(i), "unmatched", 404, 0.001);
  }
  metrics.ObserveRequest(std::string(10'000, 'Y'), "/healthz", 405, 0.001);
  const std::string text = metrics.Render(registry);
  auto samples = ParseExposition(text);
  EXPECT_EQ(samples[R"(codebox_requests_total{method="GET",route="/healthz",status="200"})"], 1);
  EXPECT_EQ(samples[R"(codebox_requests_total{method="other",route="unmatched",status="404"})"],
            100);
  EXPECT_EQ(samples[R"(codebox_requests_total{method="other",route="/healthz",status="405"})"], 1);
  EXPECT_EQ(text.find("X1"), std::string::npos);
  EXPECT_LT(text.size(), 10'000u);
}

}  // namespace
}  // namespace codebox::server
