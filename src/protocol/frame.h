// Frames: the unit of the host <-> agent byte stream. See docs/protocol.md.
//
//   offset 0  u32 LE  payload length (<= the decoder's limit, default kMaxPayload)
//   offset 4  u32 LE  stream id (0 = the connection itself; else one request)
//   offset 8  u8      type (FrameType)
//   offset 9  u8[3]   reserved, must be zero
//   offset 12 payload
#ifndef CODEBOX_PROTOCOL_FRAME_H_
#define CODEBOX_PROTOCOL_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "codebox/status.h"

namespace codebox::protocol {

inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr size_t kHeaderSize = 12;
inline constexpr uint32_t kMaxPayload = 1u << 20;  // 1 MiB
// Data frames are cut at this size by senders; well under kMaxPayload.
inline constexpr size_t kDataChunk = 256u << 10;

enum class FrameType : uint8_t {
  kHello = 1,     // JSON: version handshake, first frame each way, stream 0
  kControl = 2,   // JSON: a request (host->agent) or an event (agent->host)
  kStdin = 3,     // raw bytes for an exec's stdin; empty payload = EOF
  kStdout = 4,    // raw bytes from an exec's stdout
  kStderr = 5,    // raw bytes from an exec's stderr
  kData = 6,      // raw file bytes (write_file / read_file); empty payload = end of file
};
std::string_view FrameTypeName(FrameType type);

struct Frame {
  FrameType type = FrameType::kControl;
  uint32_t stream = 0;
  std::string payload;
};

// Appends one encoded frame to *out. payload must be <= kMaxPayload (checked by callers that
// take foreign sizes; data senders cut at kDataChunk).
void AppendFrame(std::string* out, FrameType type, uint32_t stream, std::string_view payload);
std::string EncodeFrame(FrameType type, uint32_t stream, std::string_view payload);

// Incremental decoder. Memory stays bounded: a header announcing more than max_payload is an
// error as soon as its 12 bytes arrive, before any payload is buffered.
class FrameDecoder {
 public:
  explicit FrameDecoder(uint32_t max_payload = kMaxPayload) : max_payload_(max_payload) {}

  void Feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next complete frame, nullopt if more bytes are needed, or a kProtocolError that says
  // what was wrong (oversized, unknown type, reserved bits). After an error the decoder is
  // poisoned: the stream can no longer be framed, and the connection must end.
  StatusOr<std::optional<Frame>> Next();
  // True if bytes of a partial frame are buffered (at EOF this means a truncated frame).
  bool HasPartialFrame() const { return buffer_.size() > consumed_; }
  // Error to report when the stream ends now: truncated frame or OK.
  Status CheckEndOfStream() const;

 private:
  uint32_t max_payload_;
  std::string buffer_;
  size_t consumed_ = 0;
  std::optional<Status> poisoned_;
};

}  // namespace codebox::protocol

#endif  // CODEBOX_PROTOCOL_FRAME_H_
