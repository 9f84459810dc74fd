#include "server/node_load.h"

#include <gtest/gtest.h>

namespace codebox::server {
namespace {

using nlohmann::json;

TEST(NodeLoadTest, PressureAndMemoryAreReadFromProcText) {
  EXPECT_DOUBLE_EQ(ParsePressure("some avg10=12.34 avg60=1.00 avg300=0.00 total=5\n"
                                 "full avg10=50.00 avg60=0.00 avg300=0.00 total=1\n"),
                   12.34);
  EXPECT_DOUBLE_EQ(ParsePressure(""), 0);
  EXPECT_DOUBLE_EQ(ParsePressure("some avg10=nan avg60=0\n"), 0);
  EXPECT_DOUBLE_EQ(ParsePressure("some avg10=-4\n"), 0);
  EXPECT_DOUBLE_EQ(ParsePressure("some avg10=400\n"), 100);
  EXPECT_EQ(ParseMemAvailable("MemTotal: 100 kB\nMemAvailable:   2048 kB\n"), 2048u * 1024);
  EXPECT_EQ(ParseMemAvailable("MemTotal: 100 kB\n"), 0u);
}

NodeLoad Sample() {
  NodeLoad load;
  load.node = "n2";
  load.incarnation = "1f2e";
  load.boxes = 3;
  load.max_boxes = 4;
  load.pool_ready = 1;
  load.cpu_pressure = 10;
  load.memory_available_bytes = 8ull << 30;
  load.drivers = {"jail"};
  return load;
}

TEST(NodeLoadTest, FullBusyScoreAndDrivers) {
  NodeLoad load = Sample();
  EXPECT_FALSE(load.full());
  EXPECT_FALSE(load.busy());
  EXPECT_NEAR(load.score(), 0.75 + 0.10 - 0.01, 1e-9);
  EXPECT_TRUE(Offers(load, DriverKind::kAuto));
  EXPECT_TRUE(Offers(load, DriverKind::kJail));
  EXPECT_FALSE(Offers(load, DriverKind::kVm));
  load.boxes = 4;
  EXPECT_TRUE(load.full());
  load.cpu_pressure = 85;
  EXPECT_TRUE(load.busy());
  load.cpu_pressure = 0;
  load.memory_available_bytes = 100 << 20;
  EXPECT_TRUE(load.busy());
}

TEST(NodeLoadTest, TheJsonRoundTrips) {
  auto back = LoadFromJson(api::NodeLoadToJson(Sample()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->node, "n2");
  EXPECT_EQ(back->incarnation, "1f2e");
  EXPECT_EQ(back->boxes, 3u);
  EXPECT_EQ(back->max_boxes, 4u);
  EXPECT_EQ(back->pool_ready, 1u);
  EXPECT_DOUBLE_EQ(back->cpu_pressure, 10);
  EXPECT_EQ(back->drivers, std::vector<std::string>{"jail"});
}

// A peer's answer is checked field by field: a broken or lying peer is an error, never a
// crash or a node name that could not be routed.
TEST(NodeLoadTest, AWrongAnswerIsAnErrorNotACrash) {
  const json good = api::NodeLoadToJson(Sample());
  auto with = [&](const char* key, json value) {
    json j = good;
    j[key] = std::move(value);
    return LoadFromJson(j).status();
  };
  EXPECT_FALSE(LoadFromJson(json::array()).ok());
  EXPECT_FALSE(with("node", "../etc").ok());
  EXPECT_FALSE(with("node", 7).ok());
  EXPECT_FALSE(with("boxes", -1).ok());
  EXPECT_FALSE(with("boxes", "3").ok());
  EXPECT_FALSE(with("max_boxes", 1e30).ok());
  EXPECT_FALSE(with("cpu_pressure", 101).ok());
  EXPECT_FALSE(with("cpu_pressure", "high").ok());
  EXPECT_FALSE(with("drivers", "jail").ok());
  EXPECT_FALSE(with("drivers", json::array({1})).ok());
  json many = json::array();
  for (int i = 0; i < 100; ++i) many.push_back("jail");
  EXPECT_FALSE(with("drivers", many).ok());
  // Unknown drivers are left out, not trusted.
  auto odd = LoadFromJson([&] {
    json j = good;
    j["drivers"] = {"jail", "teleport", "auto"};
    return j;
  }());
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->drivers, std::vector<std::string>{"jail"});
  json missing = good;
  missing.erase("boxes");
  EXPECT_FALSE(LoadFromJson(missing).ok());
}

}  // namespace
}  // namespace codebox::server
