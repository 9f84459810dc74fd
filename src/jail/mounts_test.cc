#include "jail/mounts.h"

#include <gtest/gtest.h>

namespace codebox::jail::mounts {
namespace {

TEST(ValidateWorkdir, TakesAbsoluteNormalisedPaths) {
  for (const char* ok : {"/work", "/home/user/project", "/data/x", "/usr2", "/devices", "/w.d"}) {
    EXPECT_TRUE(ValidateWorkdir(ok).ok()) << ok;
  }
}

TEST(ValidateWorkdir, RefusesPathsThatAreNotNormalised) {
  for (const char* bad :
       {"", "work", "/", "//work", "/work/", "/a/./b", "/a/../b", "/a/..", "/a/.", "/a\nb"}) {
    Status st = ValidateWorkdir(bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
  }
}

TEST(ValidateWorkdir, RefusesPathsThatWouldHideTheImageOrTheKernelsViews) {
  for (const char* bad : {"/proc", "/proc/self", "/dev", "/dev/shm/x", "/sys", "/.codebox", "/usr",
                          "/usr/lib", "/etc", "/bin", "/lib", "/lib64", "/sbin"}) {
    Status st = ValidateWorkdir(bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("may not be in"), std::string::npos) << st.ToString();
  }
}

}  // namespace
}  // namespace codebox::jail::mounts
