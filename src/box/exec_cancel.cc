#include "codebox/process.h"

namespace codebox {

void ExecCancel::Cancel() {
  // The kill runs under the lock, so that Unbind() cannot return while it runs.
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_) return;
  cancelled_ = true;
  if (kill_) kill_();
}

bool ExecCancel::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

void ExecCancel::Bind(std::function<void()> kill) {
  std::lock_guard<std::mutex> lock(mu_);
  kill_ = std::move(kill);
  if (cancelled_ && kill_) kill_();
}

void ExecCancel::Unbind() {
  std::lock_guard<std::mutex> lock(mu_);
  kill_ = nullptr;
}

}  // namespace codebox
