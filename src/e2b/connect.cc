#include "e2b/connect.h"

#include <nlohmann/json.hpp>

#include "base/json.h"
#include "base/text.h"

namespace codebox::e2b::connect {

namespace {

// Each code's name on the wire and the HTTP status a unary error goes with.
struct CodeInfo {
  Code code;
  std::string_view name;
  int http_status;
};
constexpr CodeInfo kCodes[] = {
    {Code::kCanceled, "canceled", 499},
    {Code::kUnknown, "unknown", 500},
    {Code::kInvalidArgument, "invalid_argument", 400},
    {Code::kDeadlineExceeded, "deadline_exceeded", 504},
    {Code::kNotFound, "not_found", 404},
    {Code::kAlreadyExists, "already_exists", 409},
    {Code::kPermissionDenied, "permission_denied", 403},
    {Code::kResourceExhausted, "resource_exhausted", 429},
    {Code::kFailedPrecondition, "failed_precondition", 400},
    {Code::kAborted, "aborted", 409},
    {Code::kOutOfRange, "out_of_range", 400},
    {Code::kUnimplemented, "unimplemented", 501},
    {Code::kInternal, "internal", 500},
    {Code::kUnavailable, "unavailable", 503},
    {Code::kDataLoss, "data_loss", 500},
    {Code::kUnauthenticated, "unauthenticated", 401},
};

const CodeInfo& InfoOf(Code code) {
  for (const CodeInfo& info : kCodes) {
    if (info.code == code) return info;
  }
  return kCodes[1];  // unknown
}

}  // namespace

std::string_view CodeName(Code code) { return InfoOf(code).name; }

int HttpStatus(Code code) { return InfoOf(code).http_status; }

Code CodeFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return Code::kUnknown;  // not an error: a caller's bug
    case StatusCode::kInvalidArgument:
      return Code::kInvalidArgument;
    case StatusCode::kNotFound:
      return Code::kNotFound;
    case StatusCode::kUnavailable:
    case StatusCode::kStartFailed:
    case StatusCode::kBoxCrashed:
    case StatusCode::kBoxLost:
      return Code::kUnavailable;
    case StatusCode::kDeadlineExceeded:
      return Code::kDeadlineExceeded;
    case StatusCode::kProtocolError:
      return Code::kInternal;  // the box broke the protocol
    case StatusCode::kIoError:
      return Code::kInternal;
    case StatusCode::kPermissionDenied:
      return Code::kPermissionDenied;
    case StatusCode::kLimitExceeded:
    case StatusCode::kResourceExhausted:
      return Code::kResourceExhausted;
    case StatusCode::kInternal:
      return Code::kInternal;
    case StatusCode::kFailedPrecondition:
      return Code::kFailedPrecondition;
  }
  return Code::kUnknown;
}

std::string ErrorJson(Code code, std::string_view message) {
  return base::JsonText({{"code", CodeName(code)}, {"message", std::string(message)}});
}

namespace {

std::string Enveloped(uint8_t flags, std::string_view payload) {
  const auto n = static_cast<uint32_t>(payload.size());
  std::string out;
  out.reserve(kEnvelopeHeaderBytes + payload.size());
  out.push_back(static_cast<char>(flags));
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((n >> shift) & 0xff));
  out.append(payload);
  return out;
}

}  // namespace

std::string Envelope(std::string_view json) { return Enveloped(0, json); }

std::string EndOfStream(const Status& status) {
  if (status.ok()) return Enveloped(kEndStreamFlag, "{}");
  const Code code = CodeFor(status.code());
  const std::string error = ErrorJson(code, status.message());
  return Enveloped(kEndStreamFlag, "{\"error\":" + error + "}");
}

StatusOr<std::string_view> SingleEnvelope(std::string_view body, size_t max_payload_bytes) {
  if (body.size() < kEnvelopeHeaderBytes) {
    return InvalidArgument("a streaming request's body is " + std::to_string(body.size()) +
                           " bytes, shorter than an envelope's 5-byte header");
  }
  const auto flags = static_cast<uint8_t>(body[0]);
  if (flags & kCompressedFlag) {
    return InvalidArgument(
        "a streaming request's envelope is compressed; this server takes "
        "none (send no Connect-Content-Encoding)");
  }
  if (flags != 0) {
    return InvalidArgument("a streaming request's envelope has flags " + std::to_string(flags) +
                           ", expected 0 (one data message)");
  }
  uint32_t n = 0;
  for (size_t i = 1; i < kEnvelopeHeaderBytes; ++i) n = (n << 8) | static_cast<uint8_t>(body[i]);
  if (n > max_payload_bytes) {
    return InvalidArgument("a streaming request's message is " + std::to_string(n) +
                           " bytes, more than the " + std::to_string(max_payload_bytes) +
                           " this server takes");
  }
  const size_t rest = body.size() - kEnvelopeHeaderBytes;
  if (n != rest) {
    return InvalidArgument("a streaming request's envelope says " + std::to_string(n) +
                           " bytes but " + std::to_string(rest) +
                           " follow it (the body must be exactly one message)");
  }
  return body.substr(kEnvelopeHeaderBytes);
}

bool IsStreamContentType(std::string_view content_type) {
  std::string_view type = content_type.substr(0, content_type.find(';'));
  while (!type.empty() && type.back() == ' ') type.remove_suffix(1);
  return base::AsciiLower(type) == kStreamContentType;
}

}  // namespace codebox::e2b::connect
