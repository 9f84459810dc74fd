// What a running program printed so far, gathered from an output callback (another thread),
// for tests that wait for a text before they answer it.
#ifndef CODEBOX_TESTS_COMMON_SEEN_OUTPUT_H_
#define CODEBOX_TESTS_COMMON_SEEN_OUTPUT_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

namespace codebox::testing {

class SeenOutput {
 public:
  // For ExecOptions::on_stdout and the like; the SeenOutput must outlive the program.
  std::function<void(std::string_view)> Sink() {
    return [this](std::string_view data) {
      std::lock_guard<std::mutex> lock(mu_);
      text_.append(data);
      cv_.notify_all();
    };
  }
  // True once `text` has been printed, false after `wait`.
  bool WaitFor(const std::string& text, std::chrono::milliseconds wait = std::chrono::seconds(20)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, wait, [&] { return text_.find(text) != std::string::npos; });
  }
  std::string text() {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string text_;
};

}  // namespace codebox::testing

#endif  // CODEBOX_TESTS_COMMON_SEEN_OUTPUT_H_
