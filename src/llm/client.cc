#include "llm/client.h"

#include <cstdlib>
#include <random>
#include <thread>

#include "llm/http.h"
#include "base/sse.h"

namespace codebox::llm {
namespace {

using std::chrono::milliseconds;

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : fallback;
}

bool Retryable(long status) { return status == 429 || (status >= 500 && status <= 599); }

std::string Seconds(milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", ms.count() / 1000.0);
  return buf;
}

// Jitter spreads the retries of many clients hit by the same outage.
milliseconds Backoff(const ClientOptions& o, int retry) {
  double base = static_cast<double>(o.initial_backoff.count()) * (1u << std::min(retry, 16));
  static thread_local std::mt19937 rng{std::random_device{}()};
  double jitter = std::uniform_real_distribution<double>(1.0, 1.25)(rng);
  return std::min(milliseconds(static_cast<long long>(base * jitter)), o.max_backoff);
}

// Turns a final HTTP error into a Status that says what to do about it.
Status HttpErrorStatus(const ClientOptions& o, long status, const std::string& body, int attempts) {
  std::string server = ErrorMessageFromBody(body);
  std::string http = "HTTP " + std::to_string(status) + ": " + server;
  switch (status) {
    case 401:
    case 403:
      return PermissionDenied(o.base_url + " refused the API key (" + http +
                              "); check OPENAI_API_KEY");
    case 404:
      return NotFound("model '" + o.model + "' is not served by " + o.base_url + " (" + http +
                      "); check --model / CODEBOX_MODEL, and that OPENAI_BASE_URL ends in /v1");
    case 400:
    case 422:
      return InvalidArgument(o.base_url + " rejected the request (" + http + ")");
    default:
      break;
  }
  if (Retryable(status)) {
    return Unavailable(o.base_url + " kept failing (" + http + ") after " +
                       std::to_string(attempts) + " attempts; try again later");
  }
  return ProtocolError(o.base_url + " answered with an unexpected " + http);
}

}  // namespace

ClientOptions ClientOptionsFromEnvironment(ClientOptions o) {
  if (o.base_url.empty()) o.base_url = EnvOr("OPENAI_BASE_URL", kDefaultBaseUrl);
  if (o.api_key.empty()) o.api_key = EnvOr("OPENAI_API_KEY", "");
  if (o.model.empty()) o.model = EnvOr("CODEBOX_MODEL", kDefaultModel);
  return o;
}

ChatClient::ChatClient(ClientOptions options) : options_(std::move(options)) {
  while (!options_.base_url.empty() && options_.base_url.back() == '/') options_.base_url.pop_back();
}

StatusOr<CompletionResult> ChatClient::Complete(
    const std::vector<Message>& messages, const std::vector<ToolSpec>& tools,
    const std::function<void(std::string_view)>& on_text,
    const std::function<void(std::string_view)>& on_reasoning) {
  const ClientOptions& o = options_;
  // OpenAI itself always wants a key (local servers usually do not): say so before the
  // request rather than relay a bare 401 or a network error.
  if (o.api_key.empty() && o.base_url == kDefaultBaseUrl) {
    return PermissionDenied("OPENAI_API_KEY is not set; export it for " + o.base_url +
                           ", or point OPENAI_BASE_URL (or --base-url) at a local server");
  }
  HttpRequest request;
  request.url = o.base_url + "/chat/completions";
  request.headers = {"Content-Type: application/json",
                     o.stream ? "Accept: text/event-stream" : "Accept: application/json"};
  if (!o.api_key.empty()) request.headers.push_back("Authorization: Bearer " + o.api_key);
  request.body = BuildChatRequestJson(o.model, messages, tools, o.stream);
  request.connect_timeout = o.connect_timeout;
  request.idle_timeout = o.request_timeout;

  auto start = std::chrono::steady_clock::now();
  for (int attempt = 1;; ++attempt) {
    // Fresh per attempt: a failed attempt streams nothing (its status is not 2xx).
    base::SseParser parser;
    StreamAssembler assembler(on_text, on_reasoning);
    Status stream_status;
    std::string raw;  // the start of the body, for servers that ignore "stream": true
    // A data-less event (a named keep-alive) carries no chunk.
    auto on_event = [&](std::string_view, std::string_view data) {
      if (!data.empty() && stream_status.ok() && !assembler.done()) {
        stream_status = assembler.AddEventData(data);
      }
      return stream_status;
    };
    BodyCallback on_body;
    if (o.stream) {
      on_body = [&](std::string_view bytes) {
        if (!assembler.saw_chunk() && raw.size() < (1u << 20)) raw.append(bytes);
        Status fed = parser.Feed(bytes, on_event);
        if (stream_status.ok()) stream_status = fed;
        return stream_status.ok();
      };
    }
    StatusOr<HttpResponse> response = HttpPost(request, on_body);
    if (!response.ok()) {
      if (!stream_status.ok()) return stream_status.WithContext("reading the stream from " + o.base_url);
      Status s = response.status();
      if (s.code() == StatusCode::kUnavailable) {
        return Unavailable(s.message() + "; is the server running, and is OPENAI_BASE_URL right?");
      }
      return s;
    }
    long status = response->status;
    if (status >= 200 && status < 300) {
      CompletionResult result;
      result.attempts = attempt;
      if (o.stream) {
        Status finished = parser.Finish(on_event);
        if (stream_status.ok()) stream_status = finished;
        // A server that ignores "stream": true answers with one JSON body.
        size_t start = raw.find_first_not_of(" \t\r\n");
        if (!assembler.saw_chunk() && start != std::string::npos && raw[start] == '{') {
          auto parsed = ParseChatReplyJson(raw);
          if (!parsed.ok()) return parsed.status().WithContext("malformed reply from " + o.base_url);
          result.reply = std::move(*parsed);
        } else {
          RETURN_IF_ERROR(stream_status.WithContext("malformed stream from " + o.base_url));
          if (!assembler.saw_chunk()) {
            return ProtocolError("malformed reply from " + o.base_url +
                                 ": the stream held no completion chunks");
          }
          result.reply = assembler.TakeReply();
        }
      } else {
        auto parsed = ParseChatReplyJson(response->body);
        if (!parsed.ok()) return parsed.status().WithContext("malformed reply from " + o.base_url);
        result.reply = std::move(*parsed);
      }
      result.latency = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
      return result;
    }
    if (!Retryable(status) || attempt > o.max_retries) {
      return HttpErrorStatus(o, status, response->body, attempt);
    }
    milliseconds wait = response->retry_after ? std::min(*response->retry_after, o.max_backoff)
                                              : Backoff(o, attempt - 1);
    if (o.on_notice) {
      o.on_notice("HTTP " + std::to_string(status) + " from " + o.base_url + ", retrying in " +
                  Seconds(wait) + " (attempt " + std::to_string(attempt + 1) + " of " +
                  std::to_string(o.max_retries + 1) + ")");
    }
    std::this_thread::sleep_for(wait);
  }
}

}  // namespace codebox::llm
