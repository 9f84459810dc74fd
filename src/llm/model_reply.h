// What a model asked for in one reply, whatever shape its server gave it in. The one reader of
// replies for every place the loop runs (CLI, POST /v1/ask, the Python Interpreter).
//
// Servers and small models answer in more shapes than OpenAI's API documents:
//   tool_calls          OpenAI's field; arguments as JSON text or as an object, ids missing,
//                       several calls, finish_reason "stop" or missing
//   <tool_call>{..}</tool_call>   Hermes, Qwen: the call written into the content
//   [TOOL_CALLS][{..}]  Mistral (also [TOOL_CALLS]name[ARGS]{..})
//   {"name": .., "arguments"|"parameters": ..}   a bare JSON object (or a list of them) as
//                       the whole content, possibly in a ```json fence
//   <|python_tag|>...   Llama 3.x: a JSON call, or Python source for its code interpreter
//   <think>..</think>, reasoning_content / reasoning: thinking, never the answer, never run
// ReadModelReply turns each into calls, answer text and thinking; ReplyTextStream decides, as
// a reply streams, which text a person may see as it comes.
#ifndef CODEBOX_LLM_MODEL_REPLY_H_
#define CODEBOX_LLM_MODEL_REPLY_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "llm/chat.h"

namespace codebox::llm {

struct ModelTurn {
  std::string thinking;          // <think> blocks and the reasoning field, joined
  std::string content;           // the content without thinking, trimmed
  std::string text;              // the content without thinking and call markup, trimmed
  std::vector<ToolCall> calls;   // in the order written; arguments always JSON text
  std::string shape;             // where the calls came from: "tool_calls", "<tool_call>",
                                 // "[TOOL_CALLS]", "json", "<|python_tag|>"; "" for none
  // Calls written into the content that could not be read, each saying why (for the model,
  // which gets a chance to write them again).
  std::vector<std::string> unreadable;
  // The first ```python / ```py / ```python3 / bare ``` block of `text` (the fallback when the
  // model wrote code instead of calling the tool).
  std::optional<std::string> fenced_code;

  bool asks_for_tools() const { return !calls.empty() || !unreadable.empty(); }
};

// Reads one assistant message: its content, reasoning and tool_calls.
ModelTurn ReadModelReply(const Message& message);

// The code of a run_python call (its "code"), or, for a <|python_tag|> turn that carried
// source, that source. nullopt when the call's arguments are not run_python's.
std::optional<std::string> RunPythonCode(const ToolCall& call);

// For oneshot mode, which offers no tool: the program a turn asked to run, in any shape (a
// fenced block first, then a run_python call written in any shape above).
std::optional<std::string> ProgramOf(const ModelTurn& turn);

// A sentence for a person saying what a reply that held no answer and no call did hold
// ("an empty content, finish_reason \"length\" (cut short by the server's token limit), 812
// characters of thinking").
std::string DescribeEmptyReply(const ModelTurn& turn, std::string_view finish_reason);

// Streams the content of a reply to on_text as it arrives, but only text a person should see
// as the answer: thinking goes to on_thinking; from a tool-call marker (or a code fence, or a
// bare JSON start) on, text is held back, since it may be a call rather than words; the last
// bytes wait until they cannot be the start of a marker. shown() is what on_text got, which
// the loop completes with ShowRest once the turn is read.
class ReplyTextStream {
 public:
  ReplyTextStream(std::function<void(std::string_view)> on_text,
                  std::function<void(std::string_view)> on_thinking)
      : on_text_(std::move(on_text)), on_thinking_(std::move(on_thinking)) {}

  void AddContent(std::string_view delta);
  void AddReasoning(std::string_view delta);
  // The reply ended: bytes kept back only because they might have begun a marker go out.
  void Finish();
  const std::string& shown() const { return shown_; }
  bool showed_thinking() const { return showed_thinking_; }

 private:
  enum class State { kStart, kText, kThinking, kHeld };
  void Pump();
  void Show(std::string_view text);

  std::function<void(std::string_view)> on_text_;
  std::function<void(std::string_view)> on_thinking_;
  State state_ = State::kStart;
  std::string pending_;  // received, not yet decided
  std::string shown_;
  bool showed_thinking_ = false;
};

// The part of `answer` a person has not seen yet, given what the stream showed of it: the rest
// when `shown` is its start, all of it (after a line break) when it is not.
std::string UnshownAnswer(std::string_view answer, std::string_view shown);

}  // namespace codebox::llm

#endif  // CODEBOX_LLM_MODEL_REPLY_H_
