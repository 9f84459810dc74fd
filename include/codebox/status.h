// Status and StatusOr: the error model of every codebox API. No exceptions cross the public API.
// A Status carries a code and a message that says what failed, with context added on the way up
// ("start box: mount image: overlay: EINVAL").
#ifndef CODEBOX_STATUS_H_
#define CODEBOX_STATUS_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace codebox {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // the caller's input is wrong (options, paths, argv)
  kNotFound,           // an image, file or binary that should exist does not
  kUnavailable,        // this host cannot do it (no driver, no kvm, no cgroups)
  kStartFailed,        // the box did not come up
  kBoxCrashed,         // the box died under us (agent gone, kernel panic, supervisor killed)
  kDeadlineExceeded,   // a wall-clock limit passed
  kProtocolError,      // the other side sent something malformed
  kIoError,            // a syscall failed
  kPermissionDenied,
  kLimitExceeded,      // a host-side limit on what a box sends was reached (file, listing size)
  kInternal,           // a bug of ours
  // The box cannot do this as it is (RunCode in an image without IPython).
  kFailedPrecondition,
  // A server holds as many boxes as it may (HTTP 429); retry later or destroy a box.
  kResourceExhausted,
  // A server's box lived on a node (a `codebox serve` replica) that is gone, does not answer
  // or has restarted since (HTTP 404 "box_lost"): the box ended with it; make a new one.
  kBoxLost,
  kLastStatusCode = kBoxLost,  // for loops over every code
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "code: message", for logs and CLI output.
  std::string ToString() const;
  // Returns a copy with "context: " put in front of the message; the code stays. A context
  // the message already starts with (or an empty one) is not added again, so a layer may name
  // what it did without checking whether the layer below already did.
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Factories, one per code, so call sites read as what happened.
inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status StartFailed(std::string m) { return {StatusCode::kStartFailed, std::move(m)}; }
inline Status BoxCrashed(std::string m) { return {StatusCode::kBoxCrashed, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status ProtocolError(std::string m) { return {StatusCode::kProtocolError, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }
inline Status LimitExceeded(std::string m) { return {StatusCode::kLimitExceeded, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Internal("StatusOr constructed from an OK status without a value");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T&& operator*() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace codebox

#define CODEBOX_CONCAT_INNER_(a, b) a##b
#define CODEBOX_CONCAT_(a, b) CODEBOX_CONCAT_INNER_(a, b)

// RETURN_IF_ERROR(expr): returns the Status of expr from the enclosing function when not OK.
#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::codebox::Status _st = (expr);            \
    if (!_st.ok()) return _st;                 \
  } while (0)

// ASSIGN_OR_RETURN(lhs, expr): evaluates a StatusOr, returns its Status on error, else
// assigns (or declares, with `auto x`) lhs from its value.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(CODEBOX_CONCAT_(_status_or_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()

#endif  // CODEBOX_STATUS_H_
