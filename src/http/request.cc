#include "http/request.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "base/text.h"
#include "http/beast_request.h"
#include "http/server.h"

namespace codebox::http {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The bytes of the UTF-8 sequence `lead` begins, or 0 for a byte no sequence begins with.
size_t Utf8Length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 0;
}

// `text` as the inside of a JSON string. A message may quote a client's bytes (a path, a
// header): a byte that is not part of well-formed UTF-8 becomes U+FFFD, so the body stays JSON
// that any client can parse.
std::string JsonEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t n = Utf8Length(c);
      if (n > 1 && i + n <= text.size() && base::IsValidUtf8(text.substr(i, n))) {
        out.append(text.substr(i, n));
        i += n - 1;
      } else {
        out += "\\ufffd";
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

}  // namespace

StatusOr<std::string> PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      int hi = i + 2 < text.size() ? HexValue(text[i + 1]) : -1;
      int lo = i + 2 < text.size() ? HexValue(text[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        return InvalidArgument("invalid percent escape at byte " + std::to_string(i) +
                               " of the request target");
      }
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      c = ' ';
    }
    if (c == '\0') return InvalidArgument("NUL byte in the request target");
    out += c;
  }
  return out;
}

Status SplitTarget(std::string_view target, std::string* path,
                   std::map<std::string, std::string>* query) {
  size_t q = target.find('?');
  std::string_view raw_path = target.substr(0, q);
  if (raw_path.empty() || raw_path[0] != '/') {
    return InvalidArgument("the request target must be a path starting with '/'");
  }
  ASSIGN_OR_RETURN(*path, PercentDecode(raw_path, false));
  query->clear();
  if (q == std::string_view::npos) return Status::Ok();
  std::string_view rest = target.substr(q + 1);
  size_t hash = rest.find('#');
  if (hash != std::string_view::npos) rest = rest.substr(0, hash);
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    ASSIGN_OR_RETURN(std::string key, PercentDecode(pair.substr(0, eq), true));
    std::string value;
    if (eq != std::string_view::npos) {
      ASSIGN_OR_RETURN(value, PercentDecode(pair.substr(eq + 1), true));
    }
    (*query)[key] = std::move(value);
  }
  return Status::Ok();
}

std::string_view BearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size()) return {};
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return {};
  }
  std::string_view given = authorization.substr(kScheme.size());
  while (!given.empty() && given.front() == ' ') given.remove_prefix(1);
  return given;
}

int MatchBearerToken(std::string_view authorization, const std::vector<std::string>& tokens) {
  return MatchToken(BearerToken(authorization), tokens);
}

int MatchToken(std::string_view given, const std::vector<std::string>& tokens) {
  if (given.empty()) return -1;
  // Each token costs time in its own length only, and every token is compared whichever
  // matches; volatile keeps the compiler from turning the accumulation into an early exit.
  volatile int matched = -1;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::string& token = tokens[t];
    if (token.empty()) continue;
    size_t diff = given.size() ^ token.size();
    uint8_t bytes = 0;
    for (size_t i = 0; i < token.size(); ++i) {
      uint8_t g = i < given.size() ? static_cast<uint8_t>(given[i]) : 0;
      bytes |= static_cast<uint8_t>(g ^ static_cast<uint8_t>(token[i]));
    }
    // Branch-free: `hit` is all ones when this token matched.
    int hit = -static_cast<int>((diff | bytes) == 0);
    matched = (hit & static_cast<int>(t)) | (~hit & matched);
  }
  return matched;
}

bool BearerTokenMatches(std::string_view authorization, const std::vector<std::string>& tokens) {
  return MatchBearerToken(authorization, tokens) >= 0;
}

Status BuildRequest(BeastRequest&& message, const std::vector<std::string>& tokens,
                    Request* request) {
  request->method = std::string(message.method_string());
  request->target = std::string(message.target());
  for (const auto& field : message) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto [it, fresh] = request->headers.emplace(name, std::string(field.value()));
    if (!fresh) it->second += ", " + std::string(field.value());
  }
  request->body = std::move(message.body());
  RETURN_IF_ERROR(SplitTarget(request->target, &request->path, &request->query));
  if (!tokens.empty()) {
    request->token = MatchBearerToken(request->Header("authorization"), tokens);
    // E2B's SDKs send their key as X-API-KEY (docs/e2b.md); one header or the other counts.
    if (request->token < 0) request->token = MatchToken(request->Header("x-api-key"), tokens);
  }
  return Status::Ok();
}

void LimitParser(BeastParser& parser, uint64_t max_header_bytes, uint64_t max_body_bytes) {
  parser.header_limit(static_cast<uint32_t>(std::min<uint64_t>(max_header_bytes, UINT32_MAX)));
  parser.body_limit(max_body_bytes);
  // Beast keeps a reference to the callback: one for every parser, stateless.
  static auto check = [](std::uint64_t, boost::beast::string_view extensions,
                         boost::system::error_code& ec) {
    if (extensions.size() > kMaxChunkExtension) ec = boost::beast::http::error::bad_chunk_extension;
  };
  parser.on_chunk_header(check);
}

Status CheckFraming(const BeastParser& parser) {
  if (!parser.get()[boost::beast::http::field::transfer_encoding].empty() && !parser.chunked()) {
    return InvalidArgument("malformed HTTP request: a Transfer-Encoding must end in chunked");
  }
  return Status::Ok();
}

const std::string& Request::Header(std::string_view name) const {
  static const std::string kEmpty;
  auto it = headers.find(std::string(name));
  return it == headers.end() ? kEmpty : it->second;
}

bool Request::WantsEventStream() const {
  std::string accept = Header("accept");
  for (char& c : accept) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return accept.find("text/event-stream") != std::string::npos;
}

Response ErrorResponse(int status, std::string_view code, std::string_view message) {
  Response r;
  r.status = status;
  r.body = "{\"error\": {\"code\": \"" + JsonEscape(code) + "\", \"message\": \"" +
           JsonEscape(message) + "\"}}";
  if (status == 429 || status == 503) r.headers.emplace_back("Retry-After", "1");
  return r;
}

Response ErrorResponse(const Status& status) {
  int http = 500;
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      http = 400;
      break;
    case StatusCode::kNotFound:
      http = 404;
      break;
    case StatusCode::kBoxLost:
      http = 404;
      break;
    case StatusCode::kPermissionDenied:
      http = 403;
      break;
    case StatusCode::kResourceExhausted:
      http = 429;
      break;
    case StatusCode::kDeadlineExceeded:
      http = 504;
      break;
    case StatusCode::kUnavailable:
      http = 503;
      break;
    case StatusCode::kFailedPrecondition:
      http = 409;
      break;
    case StatusCode::kLimitExceeded:
      http = 413;
      break;
    case StatusCode::kBoxCrashed:
    case StatusCode::kStartFailed:
    case StatusCode::kProtocolError:
      http = 502;
      break;
    case StatusCode::kIoError:
    case StatusCode::kInternal:
    case StatusCode::kOk:
      http = 500;
      break;
  }
  std::string_view code = status.ok() ? "internal" : StatusCodeName(status.code());
  std::string message =
      status.ok() ? "an error answer was made from an OK status (a bug)" : status.message();
  return ErrorResponse(http, code, message);
}

}  // namespace codebox::http
