// A client for OpenAI-compatible Chat Completions servers (OpenAI, llama.cpp's llama-server,
// Ollama, vLLM, ...): retries with backoff on 429 and 5xx honouring Retry-After, streaming
// over server-sent events, and errors that say what to check.
//
// Thread safety: a ChatClient holds only its options; Complete may run on many threads.
#ifndef CODEBOX_LLM_CLIENT_H_
#define CODEBOX_LLM_CLIENT_H_

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/status.h"
#include "llm/chat.h"

namespace codebox::llm {

inline constexpr char kDefaultBaseUrl[] = "https://api.openai.com/v1";
inline constexpr char kDefaultModel[] = "gpt-4o-mini";

struct ClientOptions {
  std::string base_url = kDefaultBaseUrl;  // ".../v1"; "/chat/completions" is appended
  std::string api_key;                     // empty: no Authorization header (local servers)
  std::string model = kDefaultModel;
  bool stream = true;
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds request_timeout{120'000};  // longest silence from the server
  int max_retries = 4;                                 // on 429 and 5xx
  std::chrono::milliseconds initial_backoff{1'000};    // doubled per retry
  std::chrono::milliseconds max_backoff{30'000};       // also caps Retry-After
  // Told about each retry ("HTTP 429, retrying in 2.0 s"), e.g. to show progress.
  std::function<void(std::string_view)> on_notice;
};

// Fills empty base_url / api_key / model from OPENAI_BASE_URL, OPENAI_API_KEY and
// CODEBOX_MODEL, then the defaults above.
ClientOptions ClientOptionsFromEnvironment(ClientOptions options);

struct CompletionResult {
  ChatReply reply;
  std::chrono::milliseconds latency{0};  // from the first request to the last byte, retries in
  int attempts = 0;
};

class ChatClient {
 public:
  explicit ChatClient(ClientOptions options);

  // One chat turn. on_text receives the content as it streams (never tool-call fragments),
  // on_reasoning the thinking a server streams beside it (reasoning_content, reasoning). Errors, each naming what to check:
  //   kPermissionDenied  401/403: the key was refused (OPENAI_API_KEY)
  //   kNotFound          404: the model is not served there (--model, OPENAI_BASE_URL)
  //   kInvalidArgument   400/422: the server refused the request (e.g. it has no tool support)
  //   kUnavailable       unreachable, or 429/5xx still failing after max_retries
  //   kDeadlineExceeded  request_timeout of silence
  //   kProtocolError     the reply is not a chat completion
  StatusOr<CompletionResult> Complete(const std::vector<Message>& messages,
                                      const std::vector<ToolSpec>& tools,
                                      const std::function<void(std::string_view)>& on_text = {},
                                      const std::function<void(std::string_view)>& on_reasoning = {});

  const ClientOptions& options() const { return options_; }

 private:
  ClientOptions options_;
};

}  // namespace codebox::llm

#endif  // CODEBOX_LLM_CLIENT_H_
