// The peak resident set of this process, for tests that show host memory stays O(cap).
#ifndef CODEBOX_TESTS_COMMON_RSS_H_
#define CODEBOX_TESTS_COMMON_RSS_H_

#include <cstdint>
#include <fstream>
#include <string>

namespace codebox::testing {

// ASan's quarantine keeps freed memory resident, so RSS says nothing under it.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kRssIsMeaningful = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kRssIsMeaningful = false;
#else
inline constexpr bool kRssIsMeaningful = true;
#endif
#else
inline constexpr bool kRssIsMeaningful = true;
#endif

// Peak resident set since the last ResetPeakRss(), in bytes.
inline uint64_t PeakRss() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

inline void ResetPeakRss() { std::ofstream("/proc/self/clear_refs") << "5"; }

}  // namespace codebox::testing

#endif  // CODEBOX_TESTS_COMMON_RSS_H_
