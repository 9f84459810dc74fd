// The protocol without a box: JSON-RPC errors, the lifecycle, tools/list and the argument
// checks. The BoxSource here makes no box (and counts how often it was asked).
#include "mcp/session.h"

#include <gtest/gtest.h>

#include <atomic>

#include "mcp/jsonrpc.h"
#include "mcp/tools.h"

namespace codebox::mcp {
namespace {

using nlohmann::json;

class NoBoxes final : public BoxSource {
 public:
  explicit NoBoxes(std::atomic<int>* opened) : opened_(opened) {}
  StatusOr<std::shared_ptr<Box>> Open() override {
    ++*opened_;
    return Unavailable("no boxes in this test");
  }
  void Close(std::shared_ptr<Box>) override {}

 private:
  std::atomic<int>* opened_;
};

json Request(const json& id, const std::string& method, json params = json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

json InitializeParams(const std::string& version) {
  return {{"protocolVersion", version},
          {"capabilities", json::object()},
          {"clientInfo", {{"name", "test"}, {"version", "1"}}}};
}

int ErrorCode(const std::optional<json>& answer) {
  if (!answer || !answer->contains("error")) return 0;
  return (*answer)["error"]["code"].get<int>();
}

class SessionTest : public ::testing::Test {
 protected:
  SessionTest() : session_({}, std::make_unique<NoBoxes>(&opened_)) {}

  json Initialize(const std::string& version = "2025-11-25") {
    auto answer = session_.Handle(Request(0, "initialize", InitializeParams(version)));
    EXPECT_TRUE(answer.has_value());
    EXPECT_TRUE(session_.Handle({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}) ==
                std::nullopt);
    return answer.value_or(json());
  }

  std::atomic<int> opened_{0};
  Session session_;
};

TEST(ParseMessageTest, BadJsonIsAParseErrorWithIdNull) {
  for (const char* text : {"", "{", "not json", "{\"jsonrpc\": \"2.0\", }", "\xff\xfe"}) {
    ParsedMessage parsed = ParseMessage(text);
    ASSERT_FALSE(parsed.message) << text;
    ASSERT_TRUE(parsed.error_answer) << text;
    EXPECT_EQ((*parsed.error_answer)["error"]["code"], kParseError) << text;
    EXPECT_TRUE((*parsed.error_answer)["id"].is_null());
  }
}

TEST(ParseMessageTest, BatchesAndNonObjectsAreInvalidRequests) {
  for (const char* text :
       {"[]", "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", "1", "\"ping\"", "null"}) {
    ParsedMessage parsed = ParseMessage(text);
    ASSERT_TRUE(parsed.error_answer) << text;
    EXPECT_EQ((*parsed.error_answer)["error"]["code"], kInvalidRequest) << text;
  }
  ParsedMessage ok = ParseMessage(R"({"jsonrpc":"2.0","id":1,"method":"ping"})");
  ASSERT_TRUE(ok.message);
  EXPECT_FALSE(ok.error_answer);
  EXPECT_TRUE(IsRequest(*ok.message, "ping"));
  EXPECT_FALSE(IsRequest(*ok.message, "initialize"));
  EXPECT_FALSE(IsRequest(json{{"jsonrpc", "2.0"}, {"method", "ping"}}, "ping"));  // no id
}

TEST_F(SessionTest, InitializeNegotiatesAKnownVersion) {
  EXPECT_FALSE(session_.initialized());
  json answer = Initialize("2025-06-18");
  EXPECT_EQ(answer["id"], 0);
  EXPECT_EQ(answer["result"]["protocolVersion"], "2025-06-18");
  EXPECT_TRUE(answer["result"]["capabilities"].contains("tools"));
  EXPECT_EQ(answer["result"]["serverInfo"]["name"], "codebox");
  EXPECT_TRUE(session_.initialized());
  EXPECT_EQ(session_.protocol_version(), "2025-06-18");
  EXPECT_EQ(opened_, 0) << "initialize must not make a box";
}

TEST_F(SessionTest, InitializeAnswersOurNewestForAnUnknownVersion) {
  json answer = Initialize("1999-01-01");
  EXPECT_EQ(answer["result"]["protocolVersion"], kSupportedProtocolVersions[0]);
}

TEST_F(SessionTest, InitializeChecksItsParamsAndComesOnce) {
  EXPECT_EQ(ErrorCode(session_.Handle(Request(1, "initialize", {{"protocolVersion", 5}}))),
            kInvalidParams);
  json no_client_info = InitializeParams("2025-11-25");
  no_client_info.erase("clientInfo");
  EXPECT_EQ(ErrorCode(session_.Handle(Request(1, "initialize", no_client_info))), kInvalidParams);
  EXPECT_FALSE(session_.initialized());
  Initialize();
  EXPECT_EQ(ErrorCode(session_.Handle(Request(2, "initialize", InitializeParams("2025-11-25")))),
            kInvalidRequest);
}

TEST_F(SessionTest, RequestsBeforeInitializeAreRefusedButPingIsAnswered) {
  EXPECT_EQ(ErrorCode(session_.Handle(Request(1, "tools/list"))), kInvalidRequest);
  auto pong = session_.Handle(Request("p", "ping"));
  ASSERT_TRUE(pong);
  EXPECT_EQ((*pong)["id"], "p");
  EXPECT_EQ((*pong)["result"], json::object());
}

TEST_F(SessionTest, InvalidRequests) {
  Initialize();
  // Not 2.0, no method, a method that is not a string, an id of the wrong type.
  EXPECT_EQ(ErrorCode(session_.Handle({{"jsonrpc", "1.0"}, {"id", 1}, {"method", "ping"}})),
            kInvalidRequest);
  EXPECT_EQ(ErrorCode(session_.Handle({{"id", 1}, {"method", "ping"}})), kInvalidRequest);
  EXPECT_EQ(ErrorCode(session_.Handle({{"jsonrpc", "2.0"}, {"id", 1}})), kInvalidRequest);
  EXPECT_EQ(ErrorCode(session_.Handle({{"jsonrpc", "2.0"}, {"id", 1}, {"method", 7}})),
            kInvalidRequest);
  for (json bad_id : {json(nullptr), json(1.5), json::array(), json::object()}) {
    auto answer = session_.Handle({{"jsonrpc", "2.0"}, {"id", bad_id}, {"method", "ping"}});
    EXPECT_EQ(ErrorCode(answer), kInvalidRequest) << bad_id;
    EXPECT_TRUE((*answer)["id"].is_null());
  }
  EXPECT_EQ(ErrorCode(session_.Handle(Request(1, "tools/list", json::array()))), kInvalidParams);
  EXPECT_EQ(ErrorCode(session_.Handle(json::array())), kInvalidRequest);
}

TEST_F(SessionTest, UnknownMethodIsMethodNotFound) {
  Initialize();
  auto answer = session_.Handle(Request(9, "resources/list"));
  EXPECT_EQ(ErrorCode(answer), kMethodNotFound);
  EXPECT_EQ((*answer)["id"], 9);
}

TEST_F(SessionTest, NotificationsAndResponsesGetNoAnswer) {
  Initialize();
  EXPECT_FALSE(session_.Handle({{"jsonrpc", "2.0"}, {"method", "notifications/whatever"}}));
  EXPECT_FALSE(session_.Handle({{"jsonrpc", "2.0"}, {"method", "tools/call"}}));  // no id
  EXPECT_FALSE(session_.Handle(
      {{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", 7}}}}));
  EXPECT_FALSE(session_.Handle({{"jsonrpc", "2.0"}, {"id", 3}, {"result", json::object()}}));
  EXPECT_FALSE(session_.Handle(
      {{"jsonrpc", "2.0"}, {"id", 3}, {"error", {{"code", -1}, {"message", "x"}}}}));
}

TEST_F(SessionTest, ToolsListHasTheSixToolsWithStrictSchemas) {
  Initialize();
  auto answer = session_.Handle(Request(1, "tools/list"));
  ASSERT_TRUE(answer && answer->contains("result")) << answer->dump();
  std::vector<std::string> names;
  for (const json& tool : (*answer)["result"]["tools"]) {
    names.push_back(tool["name"]);
    const json& schema = tool["inputSchema"];
    EXPECT_EQ(schema["type"], "object") << tool["name"];
    EXPECT_TRUE(schema["required"].is_array()) << tool["name"];
    EXPECT_EQ(schema["additionalProperties"], false) << tool["name"];
    EXPECT_FALSE(tool["description"].get<std::string>().empty());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"run_python", "run_command", "write_file", "read_file",
                                             "list_files", "reset"}));
  EXPECT_EQ((*answer)["result"]["tools"][0]["inputSchema"]["required"], json({"code"}));
}

TEST_F(SessionTest, UnknownToolAndMalformedCallsAreInvalidParams) {
  Initialize();
  auto unknown = session_.Handle(Request(1, "tools/call", {{"name", "rm_rf"}}));
  EXPECT_EQ(ErrorCode(unknown), kInvalidParams);
  EXPECT_NE((*unknown)["error"]["message"].get<std::string>().find("rm_rf"), std::string::npos);
  EXPECT_EQ(ErrorCode(session_.Handle(Request(2, "tools/call", json::object()))), kInvalidParams);
  EXPECT_EQ(ErrorCode(session_.Handle(
                Request(3, "tools/call", {{"name", "run_python"}, {"arguments", "x"}}))),
            kInvalidParams);
  EXPECT_EQ(opened_, 0);
}

// 2025-11-25 (SEP-1303): argument errors are results with isError, naming the argument.
TEST_F(SessionTest, BadArgumentsAreToolErrorsSince20251125) {
  Initialize("2025-11-25");
  struct Case {
    json call;
    std::string named;
  };
  for (const Case& c : std::vector<Case>{
           {{{"name", "run_python"}, {"arguments", json::object()}}, "'code'"},
           {{{"name", "run_python"}, {"arguments", {{"code", 1}}}}, "'code'"},
           {{{"name", "run_python"}, {"arguments", {{"code", "1"}, {"timeout", 0}}}}, "'timeout'"},
           {{{"name", "run_python"}, {"arguments", {{"code", "1"}, {"timeout", "5"}}}},
            "'timeout'"},
           {{{"name", "run_python"}, {"arguments", {{"code", "1"}, {"extra", 1}}}}, "'extra'"},
           {{{"name", "run_command"}, {"arguments", json::object()}}, "'argv' or 'cmd'"},
           {{{"name", "run_command"}, {"arguments", {{"argv", {"ls"}}, {"cmd", "ls"}}}},
            "'argv' or 'cmd'"},
           {{{"name", "run_command"}, {"arguments", {{"argv", {"ls", 1}}}}}, "'argv'"},
           {{{"name", "run_command"}, {"arguments", {{"argv", json::array()}}}}, "'argv'"},
           {{{"name", "write_file"}, {"arguments", {{"path", "a"}}}}, "'content'"},
           {{{"name", "read_file"}, {"arguments", {{"path", ""}}}}, "'path'"},
       }) {
    auto answer = session_.Handle(Request(1, "tools/call", c.call));
    ASSERT_TRUE(answer && answer->contains("result")) << c.call << " -> " << answer->dump();
    const json& result = (*answer)["result"];
    EXPECT_EQ(result["isError"], true) << c.call;
    const std::string text = result["content"][0]["text"];
    EXPECT_NE(text.find(c.named), std::string::npos) << c.call << ": " << text;
  }
  EXPECT_EQ(opened_, 0) << "a call with bad arguments must not make a box";
}

// Before 2025-11-25 the spec listed invalid arguments among the protocol errors.
TEST_F(SessionTest, BadArgumentsAreInvalidParamsBefore20251125) {
  Initialize("2025-06-18");
  auto answer = session_.Handle(
      Request(1, "tools/call", {{"name", "run_python"}, {"arguments", {{"timeout", -1}}}}));
  EXPECT_EQ(ErrorCode(answer), kInvalidParams);
  EXPECT_NE((*answer)["error"]["message"].get<std::string>().find("'timeout'"), std::string::npos);
}

TEST_F(SessionTest, ABoxThatCannotStartIsAToolError) {
  Initialize();
  auto answer = session_.Handle(
      Request(1, "tools/call", {{"name", "run_python"}, {"arguments", {{"code", "1"}}}}));
  ASSERT_TRUE(answer && answer->contains("result")) << answer->dump();
  EXPECT_EQ((*answer)["result"]["isError"], true);
  EXPECT_NE((*answer)["result"]["content"][0]["text"].get<std::string>().find("no boxes"),
            std::string::npos);
  EXPECT_EQ(opened_, 1);
  // reset needs no box.
  auto reset = session_.Handle(Request(2, "tools/call", {{"name", "reset"}}));
  ASSERT_TRUE(reset && reset->contains("result"));
  EXPECT_EQ((*reset)["result"]["isError"], false);
  EXPECT_EQ(opened_, 1);
}

TEST(ToolTimeoutTest, SecondsAreCappedAndNeverZero) {
  SessionOptions options;
  options.max_timeout = std::chrono::seconds(60);
  EXPECT_EQ(ToolTimeout(json::object(), options), std::nullopt);
  EXPECT_EQ(ToolTimeout({{"timeout", 2.5}}, options), std::chrono::milliseconds(2500));
  EXPECT_EQ(ToolTimeout({{"timeout", 1e-9}}, options), std::chrono::milliseconds(1));
  EXPECT_EQ(ToolTimeout({{"timeout", 1e300}}, options), std::chrono::seconds(60));
  EXPECT_EQ(ToolTimeout({{"timeout", 61}}, options), std::chrono::seconds(60));
}

}  // namespace
}  // namespace codebox::mcp
