#include <gtest/gtest.h>

#include "codebox/options.h"

namespace codebox {
namespace {

TEST(BoxOptionsTest, DefaultsAreValid) { EXPECT_TRUE(BoxOptions{}.Validate().ok()); }

TEST(BoxOptionsTest, RejectsNonsenseWithAMessageNamingTheField) {
  struct Case {
    void (*mutate)(BoxOptions&);
    const char* needle;
  } cases[] = {
      {[](BoxOptions& o) { o.image = "../etc"; }, "image name"},
      {[](BoxOptions& o) { o.image = ""; }, "image name"},
      {[](BoxOptions& o) { o.cpus = 0; }, "cpus"},
      {[](BoxOptions& o) { o.memory_mib = 4; }, "memory"},
      {[](BoxOptions& o) { o.disk_mib = 0; }, "disk"},
      {[](BoxOptions& o) { o.workdir = "work"; }, "workdir"},
      {[](BoxOptions& o) { o.env["A=B"] = "x"; }, "environment variable name"},
      {[](BoxOptions& o) { o.exec_timeout = std::chrono::milliseconds(-1); }, "timeout"},
      {[](BoxOptions& o) { o.output_limit_bytes = 0; }, "output limit"},
  };
  for (const Case& c : cases) {
    BoxOptions options;
    c.mutate(options);
    Status st = options.Validate();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.needle;
    EXPECT_NE(st.message().find(c.needle), std::string::npos) << st.message();
  }
}

TEST(BoxOptionsTest, EnvironmentNamesAndValuesAreChecked) {
  EXPECT_TRUE(ValidateEnvironment({{"A", "1"}, {"PATH", "/bin"}}).ok());
  EXPECT_EQ(ValidateEnvironment({{"", "1"}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateEnvironment({{"A=B", "1"}}).code(), StatusCode::kInvalidArgument);
  Status nul = ValidateEnvironment({{"A", std::string("x\0y", 3)}});
  EXPECT_EQ(nul.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(nul.message().find("NUL"), std::string::npos);
}

TEST(BoxOptionsTest, ParsesDriverNames) {
  EXPECT_EQ(*ParseDriverKind("jail"), DriverKind::kJail);
  EXPECT_EQ(*ParseDriverKind("vm"), DriverKind::kVm);
  EXPECT_EQ(*ParseDriverKind("auto"), DriverKind::kAuto);
  auto bad = ParseDriverKind("docker");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("choose auto, jail or vm"), std::string::npos);
}

}  // namespace
}  // namespace codebox
