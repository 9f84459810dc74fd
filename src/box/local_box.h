// A box this process runs itself (local_box.cc's LocalBox) and how one starts
// (local_box_start.cc). BoxEnv is the seam between such a box and the drivers, like leveldb's
// Env: where it gets its running box and the host's deadlines for talking to the agent.
// Box::Create uses BoxEnv::Default() (the image store and the real jail and vm drivers); tests
// hand CreateBox an env of their own (tests/box/fake_backend.h) to check the Box's lifecycle,
// deadlines and error reporting without root, an image or a jail. Not part of the public API.
#ifndef CODEBOX_BOX_LOCAL_BOX_H_
#define CODEBOX_BOX_LOCAL_BOX_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "box/backend.h"
#include "box_impl/box_impl.h"
#include "codebox/box.h"
#include "codebox/options.h"
#include "codebox/status.h"
#include "net/egress_relay.h"

namespace codebox::protocol {
class AgentClient;
}  // namespace codebox::protocol

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
  // How a box's egress proxy resolves names on the host (net::SystemResolver); tests answer
  // names themselves (an allowed name that resolves to 127.0.0.1: rebinding).
  virtual net::Resolver resolver() const;

  // The image store and the real drivers (ChooseDriver, StartBackend).
  static BoxEnv& Default();
};

// A box of this process (local_box.cc's LocalBox) on a started backend and its connected agent:
// its network started and its workdir made.
StatusOr<std::unique_ptr<Box>> MakeLocalBox(const BoxOptions& options,
                                            std::unique_ptr<Backend> backend,
                                            std::unique_ptr<protocol::AgentClient> agent,
                                            BoxEnv& env);

// Box::Create of a box this process runs, on `env`. The env is used only during the call.
StatusOr<std::unique_ptr<Box>> CreateBox(const BoxOptions& options, BoxEnv& env);

}  // namespace codebox::box

#endif  // CODEBOX_BOX_LOCAL_BOX_H_
