#include "agent/output_ring.h"

#include <algorithm>
#include <cstring>

namespace codebox::agent {

void OutputRing::Append(std::string_view data) {
  if (capacity_ == 0) {
    total_ += data.size();
    return;
  }
  if (data.size() > capacity_) {
    // Only the last capacity_ bytes can be held: the rest is counted as dropped at once.
    total_ += data.size() - capacity_;
    held_ = 0;
    data.remove_prefix(data.size() - capacity_);
  }
  if (buf_.size() < capacity_ && total_ + data.size() > buf_.size()) {
    buf_.resize(std::min<uint64_t>(capacity_, std::max<uint64_t>(total_ + data.size(),
                                                                  2 * buf_.size())));
  }
  while (!data.empty()) {
    size_t at = static_cast<size_t>(total_ % capacity_);
    size_t n = std::min(data.size(), capacity_ - at);
    std::memcpy(buf_.data() + at, data.data(), n);
    data.remove_prefix(n);
    total_ += n;
    held_ = std::min<uint64_t>(held_ + n, capacity_);
  }
}

std::string_view OutputRing::Peek(uint64_t from, size_t max) const {
  if (from < start() || from >= total_ || capacity_ == 0) return {};
  size_t at = static_cast<size_t>(from % capacity_);
  size_t n = static_cast<size_t>(std::min<uint64_t>({max, total_ - from, capacity_ - at}));
  return std::string_view(buf_.data() + at, n);
}

}  // namespace codebox::agent
