#include "llm/http.h"

#include <curl/curl.h>

#include <cctype>
#include <ctime>
#include <memory>
#include <mutex>

namespace codebox::llm {
namespace {

// A reply larger than this is not a chat completion; refuse instead of filling memory.
constexpr size_t kMaxBodyBytes = 64u << 20;

using Clock = std::chrono::steady_clock;

struct Transfer {
  CURL* curl = nullptr;
  const BodyCallback* on_body = nullptr;
  HttpResponse response;
  Clock::time_point last_byte = Clock::now();
  std::chrono::milliseconds idle_timeout{0};
  bool idle_expired = false;
  bool too_large = false;
  bool aborted_by_callback = false;
  size_t body_bytes = 0;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * count;
  t->last_byte = Clock::now();
  t->body_bytes += n;
  if (t->body_bytes > kMaxBodyBytes) {
    t->too_large = true;
    return 0;  // a short count makes curl fail the transfer with CURLE_WRITE_ERROR
  }
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (t->on_body != nullptr && *t->on_body && status >= 200 && status < 300) {
    if (!(*t->on_body)(std::string_view(data, n))) {
      t->aborted_by_callback = true;
      return 0;
    }
  } else {
    t->response.body.append(data, n);
  }
  return n;
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * count;
  t->last_byte = Clock::now();
  std::string_view line(data, n);
  constexpr std::string_view kName = "retry-after:";
  if (line.size() > kName.size()) {
    bool match = true;
    for (size_t i = 0; i < kName.size() && match; ++i) {
      match = std::tolower(static_cast<unsigned char>(line[i])) == kName[i];
    }
    if (match) t->response.retry_after = ParseRetryAfter(line.substr(kName.size()));
  }
  return n;
}

// curl's own CURLOPT_LOW_SPEED_* counts whole seconds and starts only once bytes flow;
// this checks the real idle time, including the wait for the first byte.
int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (Clock::now() - t->last_byte > t->idle_timeout) {
    t->idle_expired = true;
    return 1;  // non-zero aborts with CURLE_ABORTED_BY_CALLBACK
  }
  return 0;
}

void GlobalInitOnce() {
  static std::once_flag once;
  // Not thread-safe itself, hence call_once; done lazily so a program that never asks a
  // model never initializes TLS.
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

std::optional<std::chrono::milliseconds> ParseRetryAfter(std::string_view value) {
  std::string v = Trim(value);
  if (v.empty()) return std::nullopt;
  bool digits = true;
  for (char c : v) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (digits) {
    if (v.size() > 9) return std::chrono::milliseconds(std::chrono::hours(24));
    return std::chrono::milliseconds(std::stoll(v) * 1000);
  }
  time_t when = curl_getdate(v.c_str(), nullptr);
  if (when < 0) return std::nullopt;
  time_t now = std::time(nullptr);
  return std::chrono::milliseconds(when > now ? (when - now) * 1000 : 0);
}

StatusOr<HttpResponse> HttpPost(const HttpRequest& request, const BodyCallback& on_body) {
  GlobalInitOnce();
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return Internal("curl_easy_init failed");
  struct curl_slist* raw_headers = nullptr;
  for (const std::string& h : request.headers) raw_headers = curl_slist_append(raw_headers, h.c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(raw_headers,
                                                                      curl_slist_free_all);
  Transfer t;
  t.curl = curl.get();
  t.on_body = &on_body;
  t.idle_timeout = request.idle_timeout;
  char error_buffer[CURL_ERROR_SIZE] = {0};

  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, OnProgress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_buffer);
  // Signals would interrupt the caller's threads; timeouts are ours anyway.
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  // A redirect would carry the Authorization header to wherever it points.
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");

  CURLcode rc = curl_easy_perform(c);
  std::string detail = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(rc);
  if (t.idle_expired) {
    return DeadlineExceeded("no reply from " + request.url + " for " +
                            std::to_string(request.idle_timeout.count() / 1000.0).substr(0, 5) +
                            " s (request timeout)");
  }
  if (t.too_large) return ProtocolError("reply from " + request.url + " is larger than 64 MiB");
  if (t.aborted_by_callback) return IoError("reading the reply from " + request.url + " stopped");
  switch (rc) {
    case CURLE_OK:
      break;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
      return Unavailable("cannot reach " + request.url + ": " + detail);
    case CURLE_OPERATION_TIMEDOUT:
      return DeadlineExceeded("connecting to " + request.url + ": " + detail);
    default:
      return IoError("request to " + request.url + " failed: " + detail);
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &t.response.status);
  return std::move(t.response);
}

}  // namespace codebox::llm
