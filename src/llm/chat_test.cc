#include "llm/chat.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "llm/tools.h"

namespace codebox::llm {
namespace {

using nlohmann::json;

TEST(ChatJsonTest, RequestHoldsMessagesToolsAndToolResults) {
  std::vector<Message> messages = {
      {"system", "be brief", {}, {}},
      {"user", "2+2?", {}, {}},
      {"assistant", "", {{"call_1", "run_python", R"j({"code":"print(4)"})j"}}, {}},
      {"tool", R"({"stdout":"4\n"})", {}, "call_1"},
  };
  json j = json::parse(BuildChatRequestJson("m1", messages, {RunPythonToolSpec()}, true));
  EXPECT_EQ(j["model"], "m1");
  EXPECT_EQ(j["stream"], true);
  EXPECT_EQ(j["messages"].size(), 4u);
  EXPECT_TRUE(j["messages"][2]["content"].is_null());
  EXPECT_EQ(j["messages"][2]["tool_calls"][0]["function"]["name"], "run_python");
  EXPECT_EQ(j["messages"][2]["tool_calls"][0]["type"], "function");
  EXPECT_EQ(j["messages"][3]["tool_call_id"], "call_1");
  EXPECT_EQ(j["tools"][0]["function"]["parameters"]["type"], "object");
}

TEST(ChatJsonTest, NoToolsMeansNoToolsField) {
  json j = json::parse(BuildChatRequestJson("m", {{"user", "hi", {}, {}}}, {}, false));
  EXPECT_FALSE(j.contains("tools"));
}

TEST(ChatJsonTest, ParsesReplyWithNullContentAndToolCalls) {
  auto reply = ParseChatReplyJson(R"({"choices":[{"message":{"role":"assistant","content":null,
      "tool_calls":[{"id":"c1","type":"function","function":{"name":"run_python",
      "arguments":"{\"code\":\"1\"}"}}]},"finish_reason":"tool_calls"}]})");
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->message.content, "");
  ASSERT_EQ(reply->message.tool_calls.size(), 1u);
  EXPECT_EQ(reply->message.tool_calls[0].arguments, R"({"code":"1"})");
  EXPECT_EQ(reply->finish_reason, "tool_calls");
}

TEST(ChatJsonTest, MalformedRepliesAreProtocolErrors) {
  for (const char* bad : {"<html>", "{}", R"({"choices":[]})", R"({"choices":[{"x":1}]})", "[1]"}) {
    auto reply = ParseChatReplyJson(bad);
    ASSERT_FALSE(reply.ok()) << bad;
    EXPECT_EQ(reply.status().code(), StatusCode::kProtocolError) << bad;
  }
}

TEST(ChatJsonTest, ErrorMessagesFromTheShapesServersUse) {
  EXPECT_EQ(ErrorMessageFromBody(R"({"error":{"message":"bad key","type":"x"}})"), "bad key");
  EXPECT_EQ(ErrorMessageFromBody(R"({"error":"model not found"})"), "model not found");
  EXPECT_EQ(ErrorMessageFromBody("Bad Gateway"), "Bad Gateway");
  EXPECT_EQ(ErrorMessageFromBody(""), "(empty body)");
}

TEST(StreamAssemblerTest, JoinsTextAndToolCallFragments) {
  std::string streamed;
  StreamAssembler a([&](std::string_view t) { streamed += t; });
  const char* chunks[] = {
      R"({"choices":[{"delta":{"role":"assistant","content":"Let me "}}]})",
      R"({"choices":[{"delta":{"content":"compute."}}]})",
      R"({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"run_python","arguments":"{\"co"}}]}}]})",
      R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"de\":\"print(1)\"}"}}]}}]})",
      R"({"choices":[{"delta":{},"finish_reason":"tool_calls"}]})",
      R"({"choices":[],"usage":{"total_tokens":5}})",
      "[DONE]"};
  for (const char* c : chunks) ASSERT_TRUE(a.AddEventData(c).ok()) << c;
  EXPECT_TRUE(a.done());
  ChatReply reply = a.TakeReply();
  EXPECT_EQ(streamed, "Let me compute.");
  EXPECT_EQ(reply.message.content, "Let me compute.");
  ASSERT_EQ(reply.message.tool_calls.size(), 1u);
  EXPECT_EQ(reply.message.tool_calls[0].id, "c1");
  EXPECT_EQ(reply.message.tool_calls[0].name, "run_python");
  EXPECT_EQ(reply.message.tool_calls[0].arguments, R"j({"code":"print(1)"})j");
  EXPECT_EQ(reply.finish_reason, "tool_calls");
}

TEST(StreamAssemblerTest, ReasoningWholeMessagesAndObjectArguments) {
  std::string streamed, thought;
  StreamAssembler a([&](std::string_view t) { streamed += t; },
                    [&](std::string_view t) { thought += t; });
  const char* chunks[] = {
      R"({"choices":[{"delta":{"reasoning_content":"Let me "}}]})",
      R"({"choices":[{"delta":{"reasoning":"think."}}]})",
      // A server that streams whole messages, the arguments as an object, no id, no finish.
      R"({"choices":[{"message":{"role":"assistant","content":"Go.","tool_calls":[{"index":0,"function":{"name":"run_python","arguments":{"code":"x"}}}]}}]})",
      "[DONE]"};
  for (const char* c : chunks) ASSERT_TRUE(a.AddEventData(c).ok()) << c;
  ChatReply reply = a.TakeReply();
  EXPECT_EQ(thought, "Let me think.");
  EXPECT_EQ(reply.message.reasoning, "Let me think.");
  EXPECT_EQ(streamed, "Go.");
  ASSERT_EQ(reply.message.tool_calls.size(), 1u);
  EXPECT_EQ(reply.message.tool_calls[0].id, "");
  EXPECT_EQ(reply.message.tool_calls[0].arguments, R"j({"code":"x"})j");
  EXPECT_EQ(reply.finish_reason, "");
}

TEST(ChatJsonTest, AWholeReplyKeepsItsReasoning) {
  auto reply = ParseChatReplyJson(
      R"({"choices":[{"message":{"role":"assistant","content":"42","reasoning_content":"6*7"}}]})");
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->message.reasoning, "6*7");
  EXPECT_EQ(reply->message.content, "42");
  EXPECT_EQ(reply->finish_reason, "");
}

TEST(StreamAssemblerTest, ErrorChunkAndGarbageAreErrors) {
  StreamAssembler a(nullptr);
  EXPECT_FALSE(a.AddEventData(R"({"error":{"message":"overloaded"}})").ok());
  StreamAssembler b(nullptr);
  EXPECT_EQ(b.AddEventData("not json").code(), StatusCode::kProtocolError);
}

}  // namespace
}  // namespace codebox::llm
