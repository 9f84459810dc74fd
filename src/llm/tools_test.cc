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
  Execution cell;
  cell.stdout_chunks = {std::string(30'000, 'x'), std::string(20'000, 'y')};
  cell.stderr_chunks = {"warning\n\xff bad utf8"};
  cell.error = CellError{"ZeroDivisionError", "division by zero",
                         std::string(20'000, 't') + "\nZeroDivisionError: division by zero"};
  std::string text = ToolResultJson(cell, {}, 8192);
  EXPECT_LT(text.size(), 3 * 8192u + 600u);
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["timed_out"], false);
  EXPECT_EQ(j["kernel_restarted"], false);
  EXPECT_EQ(j["output_truncated"], true);
  EXPECT_EQ(j["result"], nullptr);
  EXPECT_EQ(j["stdout"].get<std::string>().substr(0, 10), "xxxxxxxxxx");
  EXPECT_EQ(j["stdout"].get<std::string>().back(), 'y');
  EXPECT_EQ(j["error"]["name"], "ZeroDivisionError");
  // The tail of a long traceback, where the exception is, survives the cap.
  std::string tb = j["error"]["traceback"];
  EXPECT_NE(tb.find("ZeroDivisionError: division by zero"), std::string::npos);
  EXPECT_NE(tb.find("bytes left out"), std::string::npos);
  EXPECT_FALSE(j.contains("out_of_memory"));
  EXPECT_FALSE(j.contains("images"));
}

TEST(ToolsTest, ResultJsonHasTheMainResultOtherOutputsAndImageLines) {
  Execution cell;
  cell.stdout_chunks = {"a", "b\n"};
  CellResult shown, chart, main;
  shown.data = {{"text/plain", "shown"}, {"text/html", "<b>shown</b>"}};
  chart.data = {{"text/plain", "<Figure size 640x480 with 1 Axes>"}, {"image/png", "iVBOR"}};
  main.data = {{"text/plain", "2"}};
  main.is_main_result = true;
  cell.results = {shown, chart, main};
  cell.timed_out = true;
  auto j = nlohmann::json::parse(
      ToolResultJson(cell, {"[image/png 640x480 saved as chart-1.png]"}, 8192));
  EXPECT_EQ(j["stdout"], "ab\n");
  EXPECT_EQ(j["result"], "2");
  EXPECT_EQ(j["outputs"], nlohmann::json::array({"shown"}));
  EXPECT_EQ(j["images"], nlohmann::json::array({"[image/png 640x480 saved as chart-1.png]"}));
  EXPECT_EQ(j["timed_out"], true);
  EXPECT_EQ(j["output_truncated"], false);
  EXPECT_EQ(j["error"], nullptr);
}

TEST(ToolsTest, ManyOutputsShareOneCap) {
  Execution cell;
  for (int i = 0; i < 1000; ++i) {
    CellResult r;
    r.data = {{"text/plain", std::string(100, 'o')}};
    cell.results.push_back(r);
  }
  auto j = nlohmann::json::parse(ToolResultJson(cell, {}, 1000));
  ASSERT_EQ(j["outputs"].size(), 11u);
  EXPECT_EQ(j["outputs"].back(), "[... 990 more outputs left out ...]");
  EXPECT_EQ(j["output_truncated"], true);
}

TEST(ToolsTest, SchemaIsAnObjectWithCode) {
  ToolSpec spec = RunPythonToolSpec();
  auto j = nlohmann::json::parse(spec.parameters_json);
  EXPECT_EQ(j["required"][0], "code");
  EXPECT_EQ(spec.name, "run_python");
}

}  // namespace
}  // namespace codebox::llm
