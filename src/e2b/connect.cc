#include "e2b/connect.h"

#include <nlohmann/json.hpp>

#include "base/json.h"

namespace codebox::e2b::connect {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kCanceled:
      return "canceled";
    case Code::kUnknown:
      return "unknown";
    case Code::kInvalidArgument:
      return "invalid_argument";
    case Code::kDeadlineExceeded:
      return "deadline_exceeded";
    case Code::kNotFound:
      return "not_found";
    case Code::kAlreadyExists:
      return "already_exists";
    case Code::kPermissionDenied:
      return "permission_denied";
    case Code::kResourceExhausted:
      return "resource_exhausted";
    case Code::kFailedPrecondition:
      return "failed_precondition";
    case Code::kAborted:
      return "aborted";
    case Code::kOutOfRange:
      return "out_of_range";
    case Code::kUnimplemented:
      return "unimplemented";
    case Code::kInternal:
      return "internal";
    case Code::kUnavailable:
      return "unavailable";
    case Code::kDataLoss:
      return "data_loss";
    case Code::kUnauthenticated:
      return "unauthenticated";
  }
  return "unknown";
}

int HttpStatus(Code code) {
  switch (code) {
    case Code::kCanceled:
      return 499;
    case Code::kInvalidArgument:
    case Code::kFailedPrecondition:
    case Code::kOutOfRange:
      return 400;
    case Code::kDeadlineExceeded:
      return 504;
    case Code::kNotFound:
      return 404;
    case Code::kAlreadyExists:
    case Code::kAborted:
      return 409;
    case Code::kPermissionDenied:
      return 403;
    case Code::kResourceExhausted:
      return 429;
    case Code::kUnimplemented:
      return 501;
    case Code::kUnavailable:
      return 503;
    case Code::kUnauthenticated:
      return 401;
    case Code::kUnknown:
    case Code::kInternal:
    case Code::kDataLoss:
      return 500;
  }
  return 500;
}

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
  const size_t end = content_type.find(';');
  std::string_view type = content_type.substr(0, end);
  while (!type.empty() && type.back() == ' ') type.remove_suffix(1);
  if (type.size() != kStreamContentType.size()) return false;
  for (size_t i = 0; i < type.size(); ++i) {
    const char c = type[i];
    const char lower = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    if (lower != kStreamContentType[i]) return false;
  }
  return true;
}

}  // namespace codebox::e2b::connect
