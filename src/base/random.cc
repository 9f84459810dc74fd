#include "base/random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>

namespace codebox::base {

std::string RandomBytes(size_t count) {
  std::string random(count, '\0');
  size_t got = 0;
  while (got < count) {
    ssize_t n = ::getrandom(random.data() + got, count - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) std::abort();
    got += static_cast<size_t>(n);
  }
  return random;
}

}  // namespace codebox::base
