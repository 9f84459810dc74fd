#include "codebox/options.h"

#include <gtest/gtest.h>

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
      {[](BoxOptions& o) { o.user = "../root"; }, "user"},
      {[](BoxOptions& o) { o.user = "1000:"; }, "user"},
      {[](BoxOptions& o) { o.user = "Root"; }, "user"},
      {[](BoxOptions& o) { o.env["A=B"] = "x"; }, "environment variable name"},
      {[](BoxOptions& o) { o.exec_timeout = std::chrono::milliseconds(-1); }, "timeout"},
      {[](BoxOptions& o) { o.exec_timeout = std::chrono::milliseconds(0); },
       "at least 1 ms (at least 0.001 s)"},
      {[](BoxOptions& o) { o.box_timeout = std::chrono::milliseconds(0); }, "box_timeout"},
      {[](BoxOptions& o) { o.output_limit_bytes = 0; }, "output_limit_bytes"},
      {[](BoxOptions& o) { o.max_open_files = 8; }, "max_open_files: must be at least 16"},
      {[](BoxOptions& o) { o.max_processes = 0; }, "max_processes: must be at least 1"},
      {[](BoxOptions& o) { o.memory_mib = 4; }, "memory_mib: must be at least 32 MiB, got 4 MiB"},
      {[](BoxOptions& o) { o.home = std::string("a\0b", 3); }, "home: must not contain a NUL"},
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

TEST(BoxOptionsTest, NoTimeoutIsAskedForExplicitly) {
  BoxOptions options;
  options.exec_timeout = kNoTimeout;
  options.box_timeout = kNoTimeout;
  EXPECT_TRUE(options.Validate().ok());
  EXPECT_TRUE(ValidateTimeout(std::chrono::milliseconds(1), "t").ok());
  Status zero = ValidateTimeout(std::chrono::milliseconds(0), "exec timeout");
  EXPECT_EQ(zero.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero.message().find("none explicitly"), std::string::npos) << zero.message();
}

TEST(BoxOptionsTest, EnvironmentSizeIsLimitedBeforeAnyBoxStarts) {
  Status one = ValidateEnvironment({{"BIG", std::string(2 << 20, 'x')}});
  EXPECT_EQ(one.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(one.message().find("BIG"), std::string::npos) << one.message();
  std::map<std::string, std::string> many;
  for (int i = 0; i < 8; ++i) many["V" + std::to_string(i)] = std::string(100 << 10, 'x');
  Status total = ValidateEnvironment(many);
  EXPECT_EQ(total.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(total.message().find("all variables together"), std::string::npos) << total.message();
  BoxOptions options;
  options.env["BIG"] = std::string(2 << 20, 'x');
  EXPECT_EQ(options.Validate().code(), StatusCode::kInvalidArgument);
}

TEST(BoxOptionsTest, ArgvWithNulOrOversizedArgumentsIsRefused) {
  EXPECT_TRUE(ValidateArgv({"python3", "-c", "print(1)"}).ok());
  EXPECT_EQ(ValidateArgv({}).code(), StatusCode::kInvalidArgument);
  Status nul = ValidateArgv({"echo", std::string("a\0b", 3)});
  EXPECT_EQ(nul.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(nul.message().find("argument 1 contains a NUL byte at offset 1"), std::string::npos)
      << nul.message();
  Status big = ValidateArgv({"echo", std::string(kMaxArgBytes, 'x')});
  EXPECT_EQ(big.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(big.message().find("per argument"), std::string::npos) << big.message();
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
