// The agent's stderr is written by code inside the box: the supervisor passes it on to the
// caller's stderr (a terminal, often) only through this filter.
#ifndef CODEBOX_JAIL_LOG_RELAY_H_
#define CODEBOX_JAIL_LOG_RELAY_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace codebox::jail {

// Relays whole lines, each made terminal-safe (base::TerminalSafe), so an escape sequence or
// a UTF-8 character split across two reads is judged whole. A line longer than kMaxLine is
// passed on in kMaxLine pieces, each ended by a newline; after `max_total` input bytes the
// rest is dropped with one note.
class LogRelay {
 public:
  static constexpr size_t kMaxLine = 4096;

  explicit LogRelay(size_t max_total) : max_total_(max_total) {}

  // Bytes as read; returns what to write now (often empty).
  std::string Feed(std::string_view bytes);
  // At EOF: an unterminated last line, if any.
  std::string Finish();

 private:
  std::string Flush();

  size_t max_total_;
  size_t seen_ = 0;
  bool cut_ = false;
  std::string line_;
};

}  // namespace codebox::jail

#endif  // CODEBOX_JAIL_LOG_RELAY_H_
