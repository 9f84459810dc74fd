// Shared by the registry tests: registry options for jail boxes, a skip when this host cannot
// start one (as tests/box does), and a wait with a deadline.
#ifndef CODEBOX_SERVER_REGISTRY_TEST_UTIL_H_
#define CODEBOX_SERVER_REGISTRY_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "server/box_registry.h"
#include "testing/box_test_util.h"

namespace codebox::server {

inline RegistryOptions TestRegistryOptions() {
  RegistryOptions options;
  options.defaults = testing::TestBoxOptions();
  options.max_boxes = 32;
  return options;
}

// Skips the test (from its body) when no jail box can start here.
#define CODEBOX_SKIP_WITHOUT_BOXES()                                            \
  do {                                                                          \
    CODEBOX_MAKE_BOX_OR_SKIP(probe_box_, ::codebox::testing::TestBoxOptions()); \
  } while (0)

// Polls `done` every 10 ms until it holds or `limit` passes; returns whether it held.
inline bool WaitFor(const std::function<bool()>& done,
                    std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

inline uint32_t ReadyIn(const BoxRegistry& registry, size_t pool = 0) {
  auto pools = registry.Pools();
  return pool < pools.size() ? pools[pool].ready : 0;
}

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_REGISTRY_TEST_UTIL_H_
