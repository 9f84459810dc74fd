// The one way codebox says "no time limit": kNoTimeout, a duration no clock reaches. Used by
// the public options (BoxOptions::exec_timeout, box_timeout, ExecOptions::timeout) and by every
// layer below Box (the agent protocol's exec, the host's wait for it). A zero or negative
// timeout is never a silent "no limit".
#ifndef CODEBOX_TIMEOUT_H_
#define CODEBOX_TIMEOUT_H_

#include <chrono>

namespace codebox {

inline constexpr std::chrono::milliseconds kNoTimeout = std::chrono::milliseconds::max();

}  // namespace codebox

#endif  // CODEBOX_TIMEOUT_H_
