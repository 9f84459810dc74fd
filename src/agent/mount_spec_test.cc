#include "agent/mount_spec.h"

#include <gtest/gtest.h>
#include <sys/mount.h>

namespace codebox::agent {
namespace {

TEST(ParseMountSpec, SplitsTypeTargetAndOptions) {
  auto m = ParseMountSpec("tmpfs:/tmp:size=64m,mode=1777");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->type, "tmpfs");
  EXPECT_EQ(m->target, "/tmp");
  EXPECT_EQ(m->options, "size=64m,mode=1777");
  auto bare = ParseMountSpec("proc:/proc");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->target, "/proc");
  EXPECT_EQ(bare->options, "");
  auto colons = ParseMountSpec("tmpfs:/t:a:b");
  ASSERT_TRUE(colons.ok());
  EXPECT_EQ(colons->options, "a:b") << "options may hold colons";
}

TEST(ParseMountSpec, NeverAllowsSetuidAndDevicesOnlyWhereTheyBelong) {
  for (const char* spec : {"proc:/proc", "sysfs:/sys", "tmpfs:/tmp", "devtmpfs:/dev",
                           "devpts:/dev/pts", "mqueue:/dev/mqueue"}) {
    auto m = ParseMountSpec(spec);
    ASSERT_TRUE(m.ok()) << spec;
    EXPECT_TRUE(m->flags & MS_NOSUID) << spec;
    const bool may_hold_devices = m->type == "devtmpfs" || m->type == "tmpfs";
    EXPECT_EQ((m->flags & MS_NODEV) != 0, !may_hold_devices) << spec;
    const bool kernel_view = m->type == "proc" || m->type == "sysfs";
    EXPECT_EQ((m->flags & MS_NOEXEC) != 0, kernel_view) << spec;
  }
}

TEST(ParseMountSpec, RefusesMalformedSpecs) {
  for (const char* bad : {"", "proc", ":/proc", "proc:", "proc:relative", "proc::opts"}) {
    auto m = ParseMountSpec(bad);
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
    EXPECT_NE(m.status().message().find("--mount"), std::string::npos) << m.status().ToString();
  }
}

}  // namespace
}  // namespace codebox::agent
