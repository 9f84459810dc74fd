// Helpers of the code-interpreter (Box::RunCode) tests.
#ifndef CODEBOX_TESTS_BOX_KERNEL_TEST_UTIL_H_
#define CODEBOX_TESTS_BOX_KERNEL_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "codebox/box.h"

namespace codebox::testing {

// Runs a cell that must run (an exception in it is fine); the test fails if RunCode errs.
inline Execution RunOk(Box& box, std::string_view code, const RunCodeOptions& options = {}) {
  auto e = box.RunCode(code, options);
  EXPECT_TRUE(e.ok()) << "RunCode(" << code << "): " << e.status().ToString();
  return e.ok() ? std::move(*e) : Execution();
}

inline std::string Joined(const std::vector<std::string>& chunks) {
  std::string all;
  for (const std::string& c : chunks) all += c;
  return all;
}

}  // namespace codebox::testing

#endif  // CODEBOX_TESTS_BOX_KERNEL_TEST_UTIL_H_
