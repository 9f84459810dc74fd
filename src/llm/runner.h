// What the interpreter needs from a box, behind an interface so that tests can put a
// scripted or failing runner in its place. OpenBoxRunner gives the real one (codebox::Box).
#ifndef CODEBOX_LLM_RUNNER_H_
#define CODEBOX_LLM_RUNNER_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/box.h"
#include "codebox/execution.h"
#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::llm {

class CodeRunner {
 public:
  virtual ~CodeRunner() = default;
  // Same contracts as codebox::Box: RunCode runs a cell of the box's one code-interpreter
  // session (variables persist; an exception is a result, not an error); Exec runs a command
  // (a non-zero exit is a result).
  virtual StatusOr<Execution> RunCode(std::string_view code) = 0;
  virtual StatusOr<ExecResult> Exec(const std::vector<std::string>& argv) = 0;
  virtual Status CopyIn(const std::string& host_path, const std::string& box_path) = 0;
  virtual Status CopyOut(const std::string& box_path, const std::string& host_path,
                         const CopyOutOptions& options = {}) = 0;
  virtual std::string driver() const = 0;
};

using RunnerFactory = std::function<StatusOr<std::unique_ptr<CodeRunner>>(const BoxOptions&)>;

// A codebox::Box created from options.
StatusOr<std::unique_ptr<CodeRunner>> OpenBoxRunner(const BoxOptions& options);
// A runner over a box someone else made (codebox serve: a box of its registry, counted
// against its --max-boxes); the box lives as long as its last owner.
std::unique_ptr<CodeRunner> BoxRunnerOver(std::shared_ptr<Box> box);

}  // namespace codebox::llm

#endif  // CODEBOX_LLM_RUNNER_H_
