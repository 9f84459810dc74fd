// ParsePoolSpec and PoolMatchKey: no box needed.
#include <gtest/gtest.h>

#include "server/box_registry.h"
#include "server/box_registry_state.h"

namespace codebox::server {
namespace {

TEST(PoolSpecTest, ParsesImageSizeAndOptions) {
  BoxOptions defaults;
  defaults.home = "/srv/codebox";
  auto spec = ParsePoolSpec("python=4,driver=jail,memory=256,kernel=1", defaults);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->options.image, "python");
  EXPECT_EQ(spec->size, 4u);
  EXPECT_EQ(spec->options.driver, DriverKind::kJail);
  EXPECT_EQ(spec->options.memory_mib, 256u);
  EXPECT_TRUE(spec->kernel);
  EXPECT_EQ(spec->options.home, "/srv/codebox") << "defaults are kept";
  EXPECT_EQ(spec->text, "python=4,driver=jail,memory=256,kernel=1");
}

TEST(PoolSpecTest, ParsesOtherOptionKinds) {
  auto spec = ParsePoolSpec(
      "python-data=1,cpus=0.5,exec_timeout=none,box-timeout=60,env=A=1,env=B=x=y,kernel=no", {});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->options.image, "python-data");
  EXPECT_DOUBLE_EQ(spec->options.cpus, 0.5);
  EXPECT_EQ(spec->options.exec_timeout, kNoTimeout);
  EXPECT_EQ(spec->options.box_timeout, std::chrono::seconds(60));
  EXPECT_EQ(spec->options.env, (std::map<std::string, std::string>{{"A", "1"}, {"B", "x=y"}}));
  EXPECT_FALSE(spec->kernel);
  // Sizes and durations as the CLI flags take them.
  auto units = ParsePoolSpec("python=1,memory=1G,exec_timeout=500ms,--disk-mib=64M", {});
  ASSERT_TRUE(units.ok()) << units.status().ToString();
  EXPECT_EQ(units->options.memory_mib, 1024u);
  EXPECT_EQ(units->options.exec_timeout, std::chrono::milliseconds(500));
  EXPECT_EQ(units->options.disk_mib, 64u);
  // A list option repeated adds up, as --allow-host does on the CLI.
  auto network = ParsePoolSpec(
      "python=1,allow_hosts=pypi.org,allow-host=files.pythonhosted.org,network_max_bytes=64M", {});
  ASSERT_TRUE(network.ok()) << network.status().ToString();
  EXPECT_EQ(network->options.allow_hosts,
            (std::vector<std::string>{"pypi.org", "files.pythonhosted.org"}));
  EXPECT_EQ(network->options.network_max_bytes, 64u << 20);
  auto bad = ParsePoolSpec("python=1,allow_hosts=bad host", {});
  EXPECT_NE(bad.status().message().find("allowlist entry 'bad host'"), std::string::npos)
      << bad.status().ToString();
}

// Each bad spec fails with kInvalidArgument and names the part that is wrong.
TEST(PoolSpecTest, ErrorsNameTheBadPart) {
  const struct {
    const char* text;
    const char* named;
  } cases[] = {
      {"python", "'python' should be IMAGE=N"},
      {"=3", "'=3' should be IMAGE=N"},
      {"python=0", "the size '0'"},
      {"python=four", "the size 'four'"},
      {"python=-1", "the size '-1'"},
      {"python=2,memroy=256", "memroy"},
      {"python=2,memory=lots", "memory"},
      {"python=2,memory=0", "memory"},
      {"python=2,kernel=maybe", "kernel"},
      {"python=2,driver=docker", "driver"},
      {"python=2,server=unix:/x", "server cannot be set"},
      {"python=2,memory", "'memory' should be KEY=VALUE"},
      {"python=2,", "'' should be KEY=VALUE"},
  };
  for (const auto& c : cases) {
    auto spec = ParsePoolSpec(c.text, {});
    ASSERT_FALSE(spec.ok()) << c.text;
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(spec.status().message().find(c.named), std::string::npos)
        << c.text << " -> " << spec.status().message();
  }
  auto typo = ParsePoolSpec("python=2,memroy=256", {});
  EXPECT_NE(typo.status().message().find("did you mean"), std::string::npos)
      << typo.status().message();
}

TEST(PoolSpecTest, MatchKeyComparesWhatABoxDoes) {
  BoxOptions a;
  BoxOptions b = a;
  EXPECT_EQ(PoolMatchKey(a), PoolMatchKey(b));
  b.prestart = true;
  b.server_token = "t";
  EXPECT_EQ(PoolMatchKey(a), PoolMatchKey(b)) << "prestart and the server fields do not count";
  const std::vector<std::function<void(BoxOptions*)>> changes = {
      [](BoxOptions* o) { o->memory_mib = 256; },
      [](BoxOptions* o) { o->image = "python-data"; },
      [](BoxOptions* o) { o->exec_timeout = std::chrono::seconds(5); },
      [](BoxOptions* o) { o->box_timeout = std::chrono::seconds(5); },
      [](BoxOptions* o) {
        o->env = {{"A", "1"}};
      },
      [](BoxOptions* o) { o->output_limit_bytes = 1000; },
      [](BoxOptions* o) { o->driver = DriverKind::kVm; },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    BoxOptions c = a;
    changes[i](&c);
    EXPECT_NE(PoolMatchKey(a), PoolMatchKey(c)) << "change " << i;
  }
  // Length-prefixed: values that would run together as plain text stay apart.
  BoxOptions e1, e2;
  e1.env = {{"A", "1\nB 1 2"}};
  e2.env = {{"A", "1"}, {"B", "2"}};
  EXPECT_NE(PoolMatchKey(e1), PoolMatchKey(e2));
}

}  // namespace
}  // namespace codebox::server
