// Test backends for the box::BoxEnv seam (src/box/local_box.h): a Box whose "box" is the
// real agent code (codebox_agent_core) serving in a forked child of the test process, as an
// ordinary user can run it, optionally behind a relay that injects faults: the agent dies,
// stalls or lies. No root, no image, no jail.
//
// The agent runs on the host's own file system with the test's privileges: tests point
// BoxOptions::workdir at a temporary directory and run harmless commands only.
#ifndef CODEBOX_TESTS_BOX_FAKE_BACKEND_H_
#define CODEBOX_TESTS_BOX_FAKE_BACKEND_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agent_client/agent_client.h"
#include "box/local_box.h"
#include "image/store.h"
#include "protocol/frame.h"
#include "protocol/message.h"

namespace codebox::testing {

// What the relay does with one frame it has seen (and may have rewritten).
enum class Verdict {
  kForward,    // pass it on
  kDrop,       // swallow it
  kKillAgent,  // SIGKILL the agent (the frame is dropped); the host then sees the end
  kStall,      // swallow it and everything after it, both ways, keeping the connection open
  kOversize,   // send its header announcing a payload over kMaxPayload, and nothing more
};
enum class Direction { kToAgent, kToHost };
// Called on the relay's thread for every frame between host and agent.
using Tamper = std::function<Verdict(Direction, protocol::Frame&)>;

// What the test and the backend the Box owns share.
struct FakeBoxState {
  std::atomic<uint64_t> oom_kills{0};  // what Backend::OomKillCount reports
  std::atomic<int> destroy_calls{0};   // Backend::Destroy calls
  std::atomic<pid_t> agent_pid{-1};

  void set_diagnostics(std::string text) {
    std::lock_guard<std::mutex> lock(mu_);
    diagnostics_ = std::move(text);
  }
  std::string diagnostics() const {
    std::lock_guard<std::mutex> lock(mu_);
    return diagnostics_;
  }

 private:
  mutable std::mutex mu_;
  std::string diagnostics_;
};

// A BoxEnv whose boxes are in-process agents. Configure it before CreateBox.
class FakeEnv final : public box::BoxEnv {
 public:
  FakeEnv() : state(std::make_shared<FakeBoxState>()) {}

  StatusOr<std::unique_ptr<box::Backend>> StartBackend(const BoxOptions& options) override;
  std::chrono::milliseconds handshake_timeout() const override { return handshake; }
  std::chrono::milliseconds agent_idle_timeout() const override { return idle; }

  std::shared_ptr<FakeBoxState> state;
  Tamper tamper;                      // unset: the host talks to the agent directly
  std::optional<Status> start_error;  // StartBackend fails with it
  // The image's run config: the backend is planned for it (PlanImageRun) as a real driver's
  // would be, with `can_switch_user` for what the driver can do. Unset: a recipe image.
  std::optional<image::ImageConfig> image_config;
  bool can_switch_user = true;
  std::chrono::milliseconds handshake{10'000};
  std::chrono::milliseconds idle = protocol::kDefaultIdleTimeout;
};

// The request a control frame to the agent carries ("exec", "read_file", ...), or "".
std::string RequestOf(const protocol::Frame& frame);
// The event a control frame to the host carries ("exit", "file", ...), or "".
std::string EventOf(const protocol::Frame& frame);
// Rewrites a control frame's JSON with `edit`.
void EditControl(protocol::Frame& frame, const std::function<void(protocol::Json&)>& edit);

}  // namespace codebox::testing

#endif  // CODEBOX_TESTS_BOX_FAKE_BACKEND_H_
