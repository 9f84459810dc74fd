// A CodeRunner for tests of the loop on hosts without a box: cells run in host_kernel.py (an
// IPython session on the host) with an empty environment, in a temporary directory. No
// isolation at all; it runs only the code of our own scenario files.
#ifndef CODEBOX_TESTS_LLM_HOST_RUNNER_H_
#define CODEBOX_TESTS_LLM_HOST_RUNNER_H_

#include <memory>

#include "llm/runner.h"

namespace codebox::llm::testing {

std::unique_ptr<CodeRunner> MakeHostPythonRunner();

}  // namespace codebox::llm::testing

#endif  // CODEBOX_TESTS_LLM_HOST_RUNNER_H_
