// OutputRing: the last bytes a process wrote to one of its streams, so that a host that
// attaches later can replay them (docs/protocol.md, "Processes"). Offsets count every byte the
// stream ever carried; the ring holds those from start() to total(). Memory grows with what is
// written, up to the capacity, never past it.
#ifndef CODEBOX_AGENT_OUTPUT_RING_H_
#define CODEBOX_AGENT_OUTPUT_RING_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace codebox::agent {

class OutputRing {
 public:
  explicit OutputRing(size_t capacity = 0) : capacity_(capacity) {}

  void Append(std::string_view data);
  // Bytes ever appended.
  uint64_t total() const { return total_; }
  // The offset of the oldest byte held: total() - held; the bytes before it were dropped.
  uint64_t start() const { return total_ - held_; }
  // Up to `max` bytes from offset `from` (start() <= from <= total()) that lie contiguously
  // in the ring; empty when there are none. Valid until the next Append.
  std::string_view Peek(uint64_t from, size_t max) const;

 private:
  size_t capacity_;
  std::string buf_;  // grows to capacity_; byte at offset o is at o % capacity_
  uint64_t total_ = 0;
  uint64_t held_ = 0;
};

}  // namespace codebox::agent

#endif  // CODEBOX_AGENT_OUTPUT_RING_H_
