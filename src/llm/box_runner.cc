// The real runner: one codebox::Box for the whole conversation.
#include <utility>

#include "codebox/box.h"
#include "llm/runner.h"

namespace codebox::llm {
namespace {

class BoxRunner final : public CodeRunner {
 public:
  explicit BoxRunner(std::shared_ptr<Box> box) : box_(std::move(box)) {}

  StatusOr<Execution> RunCode(std::string_view code) override { return box_->RunCode(code); }
  StatusOr<ExecResult> Exec(const std::vector<std::string>& argv) override {
    return box_->Exec(argv);
  }
  Status CopyIn(const std::string& host_path, const std::string& box_path) override {
    return box_->CopyIn(host_path, box_path);
  }
  Status CopyOut(const std::string& box_path, const std::string& host_path,
                 const CopyOutOptions& options) override {
    return box_->CopyOut(box_path, host_path, options);
  }
  std::string driver() const override { return box_->info().driver; }

 private:
  std::shared_ptr<Box> box_;
};

}  // namespace

StatusOr<std::unique_ptr<CodeRunner>> OpenBoxRunner(const BoxOptions& options) {
  // The box gets options.env and nothing else: the caller's environment (API keys) stays out.
  ASSIGN_OR_RETURN(std::unique_ptr<Box> box, Box::Create(options));
  return BoxRunnerOver(std::move(box));
}

std::unique_ptr<CodeRunner> BoxRunnerOver(std::shared_ptr<Box> box) {
  return std::make_unique<BoxRunner>(std::move(box));
}

}  // namespace codebox::llm
