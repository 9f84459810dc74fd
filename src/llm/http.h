// The one place that talks to libcurl: an HTTP POST with an idle timeout, streaming of the
// body of successful replies, and the Retry-After header. Errors come back as Status, never
// as exceptions or curl codes.
#ifndef CODEBOX_LLM_HTTP_H_
#define CODEBOX_LLM_HTTP_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/status.h"

namespace codebox::llm {

struct HttpRequest {
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string body;
  std::chrono::milliseconds connect_timeout{10'000};
  // Longest wait for the next byte of the reply (the first one included). An idle limit
  // rather than a total one, so a long streamed answer is not cut while it is flowing.
  std::chrono::milliseconds idle_timeout{120'000};
};

struct HttpResponse {
  long status = 0;
  std::string body;  // empty when the body went to on_body
  std::optional<std::chrono::milliseconds> retry_after;
};

// Called with body bytes of a 2xx reply as they arrive; return false to abort the transfer.
using BodyCallback = std::function<bool(std::string_view)>;

// POSTs request. A reply with any HTTP status is a response, not an error; errors are for
// replies that never came: kUnavailable (cannot connect or resolve), kDeadlineExceeded
// (idle_timeout passed), kIoError (the transfer broke), kProtocolError (body too large).
StatusOr<HttpResponse> HttpPost(const HttpRequest& request, const BodyCallback& on_body = {});

// Parses a Retry-After value: delay seconds or an HTTP date. nullopt if neither.
std::optional<std::chrono::milliseconds> ParseRetryAfter(std::string_view value);

}  // namespace codebox::llm

#endif  // CODEBOX_LLM_HTTP_H_
