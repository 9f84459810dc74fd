#include "llm/model_reply.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace codebox::llm {
namespace {

using nlohmann::json;

Message Content(std::string content) {
  Message m;
  m.role = "assistant";
  m.content = std::move(content);
  return m;
}

// The "code" of a call's arguments, or a marker when they are not run_python's.
std::string CodeOf(const ToolCall& call) { return RunPythonCode(call).value_or("<not run_python>"); }

TEST(ModelReplyTest, NativeToolCallsKeepTheirOrderAndText) {
  Message m = Content("Let me compute.");
  m.tool_calls = {{"a", " run_python ", R"({"code": "x = 2"})"}, {"", "run_python", ""}};
  ModelTurn t = ReadModelReply(m);
  EXPECT_EQ(t.shape, "tool_calls");
  EXPECT_EQ(t.text, "Let me compute.");
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_EQ(t.calls[0].id, "a");
  EXPECT_EQ(t.calls[0].name, "run_python");
  EXPECT_EQ(CodeOf(t.calls[0]), "x = 2");
  EXPECT_EQ(t.calls[1].arguments, "{}");  // nothing becomes an empty object, answered as such
  m.tool_calls = {{"", "functions.run_python", "{}"}};
  EXPECT_EQ(ReadModelReply(m).calls[0].name, "run_python");
  EXPECT_FALSE(t.fenced_code);
}

TEST(ModelReplyTest, ArgumentsWithRawLineBreaksInTheCodeAreRead) {
  ToolCall call{"", "run_python", "{\"code\": \"import math\nprint(math.pi)\"}"};
  EXPECT_EQ(CodeOf(call), "import math\nprint(math.pi)");
}

TEST(ModelReplyTest, HermesToolCallsInTheContent) {
  ModelTurn t = ReadModelReply(Content(
      "I will run it.\n<tool_call>\n{\"name\": \"run_python\", \"arguments\": {\"code\": \"a = 1\"}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"run_python\", \"arguments\": \"{\\\"code\\\": \\\"print(a)\\\"}\"}\n"
      "</tool_call>"));
  EXPECT_EQ(t.shape, "<tool_call>");
  EXPECT_EQ(t.text, "I will run it.");
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_EQ(CodeOf(t.calls[0]), "a = 1");
  EXPECT_EQ(CodeOf(t.calls[1]), "print(a)");
  EXPECT_TRUE(t.unreadable.empty());
}

TEST(ModelReplyTest, AHermesCallLeftOpenOrBrokenIsReadOrNamed) {
  ModelTurn open = ReadModelReply(
      Content("<tool_call>{\"name\": \"run_python\", \"arguments\": {\"code\": \"print(1)\"}}"));
  ASSERT_EQ(open.calls.size(), 1u);
  EXPECT_EQ(CodeOf(open.calls[0]), "print(1)");

  ModelTurn broken = ReadModelReply(Content("<tool_call>{\"name\": \"run_python\", \"arguments\": {</tool_call>"));
  EXPECT_TRUE(broken.calls.empty());
  ASSERT_EQ(broken.unreadable.size(), 1u);
  EXPECT_NE(broken.unreadable[0].find("not valid JSON"), std::string::npos);
  EXPECT_TRUE(broken.asks_for_tools());
  EXPECT_EQ(broken.content, "<tool_call>{\"name\": \"run_python\", \"arguments\": {</tool_call>");
}

TEST(ModelReplyTest, MistralListAndArgsForms) {
  ModelTurn list = ReadModelReply(Content(
      "[TOOL_CALLS] [{\"name\": \"run_python\", \"arguments\": {\"code\": \"print(2)\"}, \"id\": \"abc123XYZ\"}]"));
  EXPECT_EQ(list.shape, "[TOOL_CALLS]");
  ASSERT_EQ(list.calls.size(), 1u);
  EXPECT_EQ(list.calls[0].id, "abc123XYZ");
  EXPECT_EQ(CodeOf(list.calls[0]), "print(2)");

  ModelTurn args = ReadModelReply(Content(
      "[TOOL_CALLS]run_python[ARGS]{\"code\": \"x = 3\"}[TOOL_CALLS]run_python[CALL_ID]k1[ARGS]{\"code\": \"print(x)\"}</s>"));
  ASSERT_EQ(args.calls.size(), 2u);
  EXPECT_EQ(CodeOf(args.calls[0]), "x = 3");
  EXPECT_EQ(args.calls[1].id, "k1");
  EXPECT_EQ(CodeOf(args.calls[1]), "print(x)");
}

TEST(ModelReplyTest, BareJsonCallsOfRunPythonOnly) {
  ModelTurn one = ReadModelReply(Content("{\"name\": \"run_python\", \"parameters\": {\"code\": \"print(4)\"}}"));
  EXPECT_EQ(one.shape, "json");
  ASSERT_EQ(one.calls.size(), 1u);
  EXPECT_EQ(CodeOf(one.calls[0]), "print(4)");
  EXPECT_EQ(one.text, "");

  ModelTurn fenced = ReadModelReply(
      Content("```json\n[{\"name\": \"run_python\", \"arguments\": {\"code\": \"a\"}}, "
              "{\"name\": \"run_python\", \"arguments\": {\"code\": \"b\"}}]\n```"));
  ASSERT_EQ(fenced.calls.size(), 2u);
  EXPECT_EQ(CodeOf(fenced.calls[1]), "b");

  // JSON that is not a call of our tool is an answer.
  ModelTurn answer = ReadModelReply(Content("{\"name\": \"Ada\", \"arguments\": 2}"));
  EXPECT_TRUE(answer.calls.empty());
  EXPECT_EQ(answer.text, "{\"name\": \"Ada\", \"arguments\": 2}");
  ModelTurn data = ReadModelReply(Content("[1, 2, 3]"));
  EXPECT_TRUE(data.calls.empty());
  EXPECT_EQ(data.text, "[1, 2, 3]");
}

TEST(ModelReplyTest, LlamaPythonTagWithSourceOrJson) {
  ModelTurn source = ReadModelReply(Content("<|python_tag|>import math\nprint(math.factorial(5))<|eom_id|>"));
  EXPECT_EQ(source.shape, "<|python_tag|>");
  ASSERT_EQ(source.calls.size(), 1u);
  EXPECT_EQ(source.calls[0].name, "run_python");
  EXPECT_EQ(CodeOf(source.calls[0]), "import math\nprint(math.factorial(5))");

  ModelTurn calls = ReadModelReply(Content(
      "<|python_tag|>{\"name\": \"run_python\", \"parameters\": {\"code\": \"x = 1\"}}; "
      "{\"name\": \"run_python\", \"parameters\": {\"code\": \"print(x)\"}}"));
  ASSERT_EQ(calls.calls.size(), 2u);
  EXPECT_EQ(CodeOf(calls.calls[1]), "print(x)");
}

TEST(ModelReplyTest, ThinkingIsNeverTheAnswerNorRun) {
  ModelTurn t = ReadModelReply(Content("<think>maybe ```python\nboom()\n```</think>\n\nThe answer is 42."));
  EXPECT_EQ(t.thinking, "maybe ```python\nboom()\n```");
  EXPECT_EQ(t.text, "The answer is 42.");
  EXPECT_FALSE(t.fenced_code);

  // The server's template opened the block: only its close is in the content.
  ModelTurn unopened = ReadModelReply(Content("hmm, 6*7\n</think>\n42"));
  EXPECT_EQ(unopened.thinking, "hmm, 6*7");
  EXPECT_EQ(unopened.text, "42");

  // Cut short while thinking: nothing but thinking.
  ModelTurn cut = ReadModelReply(Content("<think>long thoughts"));
  EXPECT_EQ(cut.thinking, "long thoughts");
  EXPECT_EQ(cut.text, "");
  EXPECT_FALSE(cut.asks_for_tools());
  EXPECT_NE(DescribeEmptyReply(cut, "length").find("token limit"), std::string::npos);

  Message field = Content("<tool_call>{\"name\": \"run_python\", \"arguments\": {\"code\": \"1\"}}</tool_call>");
  field.reasoning = "I should compute.";
  ModelTurn both = ReadModelReply(field);
  EXPECT_EQ(both.thinking, "I should compute.");
  ASSERT_EQ(both.calls.size(), 1u);
}

TEST(ModelReplyTest, FencedCodeFallbackAndProgramOf) {
  ModelTurn fence = ReadModelReply(Content("Here:\n```py\nprint(7)\n```"));
  EXPECT_TRUE(fence.calls.empty());
  ASSERT_TRUE(fence.fenced_code);
  EXPECT_EQ(*ProgramOf(fence), "print(7)\n");
  ModelTurn untagged = ReadModelReply(Content("```\nprint(8)\n```"));
  EXPECT_EQ(*ProgramOf(untagged), "print(8)\n");
  // In oneshot mode a call written in any shape is the program.
  ModelTurn hermes = ReadModelReply(
      Content("<tool_call>{\"name\": \"run_python\", \"arguments\": {\"code\": \"print(9)\"}}</tool_call>"));
  EXPECT_EQ(*ProgramOf(hermes), "print(9)");
  EXPECT_FALSE(ProgramOf(ReadModelReply(Content("just words"))));
}

// What on_text gets as a reply streams in `pieces`; thinking goes to `thought`.
std::string Stream(const std::vector<std::string>& pieces, std::string* thought = nullptr) {
  std::string shown, thinking;
  ReplyTextStream stream([&](std::string_view t) { shown += t; },
                         [&](std::string_view t) { thinking += t; });
  for (const std::string& p : pieces) stream.AddContent(p);
  stream.Finish();
  EXPECT_EQ(stream.shown(), shown);
  if (thought != nullptr) *thought = thinking;
  return shown;
}

TEST(ReplyTextStreamTest, WordsFlowThinkingAndCallsDoNot) {
  EXPECT_EQ(Stream({"The ans", "wer is 4", "2."}), "The answer is 42.");
  std::string thought;
  EXPECT_EQ(Stream({"<thi", "nk>plan", " it</th", "ink>\n\nDone", "."}, &thought), "Done.");
  EXPECT_EQ(thought, "plan it");
  EXPECT_EQ(Stream({"Running it.\n<tool", "_call>{\"name\": \"run_python\"}</tool_call>"}), "Running it.\n");
  EXPECT_EQ(Stream({"Sure [TOOL_", "CALLS][{}]"}), "Sure ");
  EXPECT_EQ(Stream({"<|python", "_tag|>print(1)"}), "");
  EXPECT_EQ(Stream({"  {\"name\": \"run_python\"", "}"}), "");
  EXPECT_EQ(Stream({"Code:\n``", "`python\nprint(1)\n```"}), "Code:\n");
  // A "<" that starts no marker is shown once the reply ends.
  EXPECT_EQ(Stream({"a <", " b <"}), "a < b <");
  // Words on either side of a thinking block never join into a marker (the fuzzer's find):
  // "<" before the block and "think>" after it are kept apart by a line break.
  EXPECT_EQ(Stream({"pl_<", "<think>x</think>", "think>T"}), "pl_<\nthink>T");
  EXPECT_EQ(Stream({"a `", "`<think></think>`b"}), "a ``\n`b");
  EXPECT_EQ(Stream({"a <think>x</think>b"}), "a b");
}

TEST(ReplyTextStreamTest, UnshownAnswerCompletesWhatTheStreamShowed) {
  EXPECT_EQ(UnshownAnswer("The answer is 42.", ""), "The answer is 42.");
  EXPECT_EQ(UnshownAnswer("The answer is 42.", "The answer is 42."), "");
  EXPECT_EQ(UnshownAnswer("Result:\n```\n42\n```", "Result:\n"), "```\n42\n```");
  EXPECT_EQ(UnshownAnswer("42", "thinking out loud"), "\n42");
}

}  // namespace
}  // namespace codebox::llm
