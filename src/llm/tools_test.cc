#include "llm/tools.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace codebox::llm {
namespace {

TEST(ToolsTest, ArgumentsGiveTheCode) {
  auto code = ParseRunPythonArguments(R"({"code": "print('hi')\n"})");
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, "print('hi')\n");
}

TEST(ToolsTest, MalformedArgumentsExplainTheExpectedShape) {
  for (const char* bad : {"print(1)", "{\"code\": ", "[1]", "{\"source\": \"x\"}", "{\"code\": 3}",
                          "{\"code\": \"  \"}"}) {
    auto code = ParseRunPythonArguments(bad);
    ASSERT_FALSE(code.ok()) << bad;
    EXPECT_EQ(code.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(code.status().message().find("Nothing was run"), std::string::npos) << bad;
  }
  EXPECT_NE(ParseRunPythonArguments("print(1)").status().message().find("{\"code\""),
            std::string::npos);
}

TEST(ToolsTest, CapKeepsHeadAndTail) {
  std::string s = std::string(100, 'a') + std::string(100, 'b');
  EXPECT_EQ(CapText(s, 200), s);
  std::string capped = CapText(s, 20);
  EXPECT_EQ(capped.substr(0, 10), std::string(10, 'a'));
  EXPECT_EQ(capped.substr(capped.size() - 10), std::string(10, 'b'));
  EXPECT_NE(capped.find("[... 180 bytes left out ...]"), std::string::npos);
}

TEST(ToolsTest, ResultJsonIsCappedAndFlagged) {
  ExecResult r;
  r.exit_code = 1;
  r.stdout_data = std::string(50'000, 'x');
  r.stderr_data = "Traceback\n\xff bad utf8";
  std::string text = ToolResultJson(r, 8192);
  EXPECT_LT(text.size(), 9000u + 200u);
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_EQ(j["timed_out"], false);
  EXPECT_EQ(j["output_truncated"], true);
  EXPECT_NE(j["stderr"].get<std::string>().find("Traceback"), std::string::npos);
  EXPECT_FALSE(j.contains("out_of_memory"));
}

TEST(ToolsTest, SchemaIsAnObjectWithCode) {
  ToolSpec spec = RunPythonToolSpec();
  auto j = nlohmann::json::parse(spec.parameters_json);
  EXPECT_EQ(j["required"][0], "code");
  EXPECT_EQ(spec.name, "run_python");
}

}  // namespace
}  // namespace codebox::llm
