#include "jail/log_relay.h"

#include "base/text.h"

namespace codebox::jail {

std::string LogRelay::Flush() {
  std::string out = base::TerminalSafe(line_, kMaxLine) + "\n";
  line_.clear();
  return out;
}

std::string LogRelay::Feed(std::string_view bytes) {
  std::string out;
  if (cut_) return out;
  if (seen_ + bytes.size() > max_total_) {
    bytes = bytes.substr(0, max_total_ - seen_);
    cut_ = true;
  }
  seen_ += bytes.size();
  for (char c : bytes) {
    if (c == '\n') {
      out += Flush();
      continue;
    }
    line_.push_back(c);
    if (line_.size() >= kMaxLine) out += Flush();
  }
  if (cut_) {
    if (!line_.empty()) out += Flush();
    out += "codebox-jail: agent log cut after " + std::to_string(max_total_) + " bytes\n";
  }
  return out;
}

std::string LogRelay::Finish() { return line_.empty() ? std::string() : Flush(); }

}  // namespace codebox::jail
