#include "codebox/status.h"

namespace codebox {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kStartFailed: return "start_failed";
    case StatusCode::kBoxCrashed: return "box_crashed";
    case StatusCode::kDeadlineExceeded: return "deadline_exceeded";
    case StatusCode::kProtocolError: return "protocol_error";
    case StatusCode::kIoError: return "io_error";
    case StatusCode::kPermissionDenied: return "permission_denied";
    case StatusCode::kLimitExceeded: return "limit_exceeded";
    case StatusCode::kInternal: return "internal";
    case StatusCode::kFailedPrecondition: return "failed_precondition";
    case StatusCode::kResourceExhausted: return "resource_exhausted";
    case StatusCode::kBoxLost: return "box_lost";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  // Layers often name the same object (the agent says "mkdir /x: EROFS", its client and the
  // box add "mkdir /x" again); saying it once is enough.
  if (context.empty() || message_ == context) return *this;
  if (message_.size() > context.size() + 1 && message_.starts_with(context) &&
      message_.compare(context.size(), 2, ": ") == 0) {
    return *this;
  }
  return Status(code_, std::string(context) + ": " + message_);
}

}  // namespace codebox
