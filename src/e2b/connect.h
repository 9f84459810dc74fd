// The subset of the Connect protocol (connectrpc.com/docs/protocol) that E2B's envd speaks and
// its SDKs use: JSON codec only, unary calls and server-streaming calls, no compression.
//
// Unary: the request body is one JSON message; the answer is one JSON message (200), or an
// error: an HTTP status paired with the code and {"code": "<name>", "message": "..."}.
// Server-streaming: the request body is one envelope; the answer (always 200,
// application/connect+json) is a sequence of envelopes, each a flags byte, a big-endian
// uint32 length and that many bytes of JSON, ended by one end-of-stream envelope (flags 0x02)
// that carries the call's error, if any. A client treats a stream without it as broken.
//
// Everything a client sends is hostile: an envelope is read with its length checked against
// the bytes present and a ceiling, and its flags checked (no compression, no end-of-stream
// from a client).
#ifndef CODEBOX_E2B_CONNECT_H_
#define CODEBOX_E2B_CONNECT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "codebox/status.h"

namespace codebox::e2b::connect {

// Connect's error codes, numbered as the protocol numbers them.
enum class Code {
  kCanceled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// The code's name on the wire ("not_found"), and the HTTP status a unary error goes with.
std::string_view CodeName(Code code);
int HttpStatus(Code code);

// The Connect code for a codebox error: the nearest meaning (a box that crashed or is lost is
// unavailable, as a sandbox that is not running is to E2B's SDKs; a host-side limit is
// resource_exhausted).
Code CodeFor(StatusCode code);

// The JSON of an error: {"code": "<name>", "message": message}; the body of a unary error and
// the "error" of an end-of-stream envelope.
std::string ErrorJson(Code code, std::string_view message);

inline constexpr uint8_t kEndStreamFlag = 0x02;
inline constexpr uint8_t kCompressedFlag = 0x01;
inline constexpr size_t kEnvelopeHeaderBytes = 5;

// One data envelope holding `json`.
std::string Envelope(std::string_view json);
// The end-of-stream envelope: {} when `status` is ok, else {"error": {code, message}}.
std::string EndOfStream(const Status& status);

// The payload of the one envelope a server-streaming request's body must be: exactly one data
// envelope (flags 0), its length within the body and at most `max_payload_bytes`. Anything
// else is kInvalidArgument, saying what was wrong.
StatusOr<std::string_view> SingleEnvelope(std::string_view body, size_t max_payload_bytes);

// The Content-Type of a streaming call, request and answer.
inline constexpr std::string_view kStreamContentType = "application/connect+json";
// True when `content_type` is that of a streaming call (parameters such as charset allowed).
bool IsStreamContentType(std::string_view content_type);

}  // namespace codebox::e2b::connect

#endif  // CODEBOX_E2B_CONNECT_H_
