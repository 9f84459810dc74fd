// The seam between Box and the drivers, like leveldb's Env: where a Box gets its running box
// and the host's deadlines for talking to the agent. Box::Create uses BoxEnv::Default() (the
// image store and the real jail and vm drivers); tests hand CreateBox an env of their own
// (tests/box/fake_backend.h) to check the Box's lifecycle, deadlines and error reporting
// without root, an image or a jail. Not part of the public API.
#ifndef CODEBOX_BOX_BOX_INTERNAL_H_
#define CODEBOX_BOX_BOX_INTERNAL_H_

#include <chrono>
#include <memory>

#include "box/backend.h"
#include "codebox/box.h"
#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::box {

class BoxEnv {
 public:
  virtual ~BoxEnv() = default;

  // Starts a running box for `options` (already validated). Its error is reported as the
  // Box's ("create box: ..."), made terminal-safe: it may quote box-controlled text.
  virtual StatusOr<std::unique_ptr<Backend>> StartBackend(const BoxOptions& options) = 0;

  // How long the agent may take to say hello (a VM under tcg is slow).
  virtual std::chrono::milliseconds handshake_timeout() const;
  // The longest any request to the agent waits without a frame (AgentClient::set_idle_timeout).
  virtual std::chrono::milliseconds agent_idle_timeout() const;

  // The image store and the real drivers (ChooseDriver, StartBackend).
  static BoxEnv& Default();
};

// Box::Create on `env`. The env is used only during the call.
StatusOr<std::unique_ptr<Box>> CreateBox(const BoxOptions& options, BoxEnv& env);

}  // namespace codebox::box

#endif  // CODEBOX_BOX_BOX_INTERNAL_H_
