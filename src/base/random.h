// Random bytes from the kernel, for ids and for what a vm guest is seeded with.
#ifndef CODEBOX_BASE_RANDOM_H_
#define CODEBOX_BASE_RANDOM_H_

#include <cstddef>
#include <string>

namespace codebox::base {

// `count` bytes from getrandom(2). Aborts when the kernel has none to give: an id or a seed
// that is not random is worse than no process (nothing safe to do instead).
std::string RandomBytes(size_t count);

}  // namespace codebox::base

#endif  // CODEBOX_BASE_RANDOM_H_
