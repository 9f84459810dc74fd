// The Chat Completions data model (the subset codebox uses) and its JSON form: building the
// request, parsing a whole reply, and assembling a streamed one from its SSE chunks.
// nlohmann::json stays inside chat.cc; its exceptions are caught there and become Status.
#ifndef CODEBOX_LLM_CHAT_H_
#define CODEBOX_LLM_CHAT_H_

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/status.h"

namespace codebox::llm {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text as the model wrote it; may be malformed
};

struct Message {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
  std::vector<ToolCall> tool_calls;  // assistant only
  std::string tool_call_id;          // tool only
  // assistant only: the thinking a server returns beside the content (reasoning_content,
  // reasoning). Never sent back: servers and models want it dropped from the history.
  std::string reasoning = {};
};

// A function the model may call. parameters_json is a JSON Schema object, as text.
struct ToolSpec {
  std::string name;
  std::string description;
  std::string parameters_json;
};

struct ChatReply {
  Message message;  // role "assistant"
  std::string finish_reason;
};

// The request body. Tools are omitted when empty (some servers reject an empty list).
std::string BuildChatRequestJson(const std::string& model, const std::vector<Message>& messages,
                                 const std::vector<ToolSpec>& tools, bool stream);

// A non-streamed reply body. kProtocolError when it is not a chat completion.
StatusOr<ChatReply> ParseChatReplyJson(std::string_view body);

// The "error.message" of an error body, or the body itself (shortened) when it has none.
std::string ErrorMessageFromBody(std::string_view body);

// Messages as OpenAI-format JSON text (for transcripts).
std::string MessagesToJson(const std::vector<Message>& messages);

// Assembles a streamed reply from the data of its SSE events: content deltas are appended
// (and handed to on_text as they come), so are reasoning deltas (to on_reasoning), and
// tool-call fragments are joined by their index.
class StreamAssembler {
 public:
  explicit StreamAssembler(std::function<void(std::string_view)> on_text,
                           std::function<void(std::string_view)> on_reasoning = {})
      : on_text_(std::move(on_text)), on_reasoning_(std::move(on_reasoning)) {}
  // One event's data. "[DONE]" ends the stream. A chunk carrying "error" is an error.
  Status AddEventData(std::string_view data);
  bool done() const { return done_; }
  bool saw_chunk() const { return saw_chunk_; }
  ChatReply TakeReply();

 private:
  std::function<void(std::string_view)> on_text_;
  std::function<void(std::string_view)> on_reasoning_;
  ChatReply reply_;
  std::map<int, ToolCall> calls_;  // by the "index" the server gives each tool call
  bool done_ = false;
  bool saw_chunk_ = false;
};

}  // namespace codebox::llm

#endif  // CODEBOX_LLM_CHAT_H_
