// Stand-in for box_runner.cc while the codebox_box library is not built yet (see
// CMakeLists.txt): every box-dependent path reports why instead of failing to link.
#include "llm/runner.h"

namespace codebox::llm {

StatusOr<std::unique_ptr<CodeRunner>> OpenBoxRunner(const BoxOptions&) {
  return Unavailable("this build has no box library (codebox_box was not built)");
}

}  // namespace codebox::llm
