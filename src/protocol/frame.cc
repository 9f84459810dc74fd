#include "protocol/frame.h"

#include <cstring>

namespace codebox::protocol {

std::string_view FrameTypeName(FrameType type) {
  switch (type) {
    case FrameType::kHello: return "hello";
    case FrameType::kControl: return "control";
    case FrameType::kStdin: return "stdin";
    case FrameType::kStdout: return "stdout";
    case FrameType::kStderr: return "stderr";
    case FrameType::kData: return "data";
  }
  return "unknown";
}

static void PutU32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

static uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

void AppendFrame(std::string* out, FrameType type, uint32_t stream, std::string_view payload) {
  char header[kHeaderSize] = {};
  PutU32(header, static_cast<uint32_t>(payload.size()));
  PutU32(header + 4, stream);
  header[8] = static_cast<char>(type);
  out->append(header, kHeaderSize);
  out->append(payload);
}

std::string EncodeFrame(FrameType type, uint32_t stream, std::string_view payload) {
  std::string out;
  out.reserve(kHeaderSize + payload.size());
  AppendFrame(&out, type, stream, payload);
  return out;
}

static bool KnownType(uint8_t t) {
  return t >= static_cast<uint8_t>(FrameType::kHello) && t <= static_cast<uint8_t>(FrameType::kData);
}

StatusOr<std::optional<Frame>> FrameDecoder::Next() {
  if (poisoned_) return *poisoned_;
  size_t available = buffer_.size() - consumed_;
  if (available < kHeaderSize) return std::optional<Frame>();
  const char* h = buffer_.data() + consumed_;
  uint32_t length = GetU32(h);
  uint32_t stream = GetU32(h + 4);
  auto type = static_cast<uint8_t>(h[8]);
  if (length > max_payload_) {
    poisoned_ = ProtocolError("frame of " + std::to_string(length) + " bytes exceeds the limit of " +
                              std::to_string(max_payload_) + " bytes");
  } else if (!KnownType(type)) {
    poisoned_ = ProtocolError("unknown frame type " + std::to_string(type));
  } else if (h[9] != 0 || h[10] != 0 || h[11] != 0) {
    poisoned_ = ProtocolError("reserved header bytes are not zero");
  }
  if (poisoned_) return *poisoned_;
  if (available < kHeaderSize + length) return std::optional<Frame>();
  Frame frame;
  frame.type = static_cast<FrameType>(type);
  frame.stream = stream;
  frame.payload.assign(h + kHeaderSize, length);
  consumed_ += kHeaderSize + length;
  // Compact once the consumed prefix dominates, so the buffer does not grow without bound.
  if (consumed_ > 65536 && consumed_ * 2 > buffer_.size()) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  return std::optional<Frame>(std::move(frame));
}

Status FrameDecoder::CheckEndOfStream() const {
  if (poisoned_) return *poisoned_;
  if (HasPartialFrame()) {
    return ProtocolError("stream ended inside a frame (" + std::to_string(buffer_.size() - consumed_) +
                         " bytes of a truncated frame)");
  }
  return Status::Ok();
}

}  // namespace codebox::protocol
