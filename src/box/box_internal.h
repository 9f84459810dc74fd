// The seam between Box and the drivers, like leveldb's Env: where a Box gets its running box
// and the host's deadlines for talking to the agent. Box::Create uses BoxEnv::Default() (the
// image store and the real jail and vm drivers); tests hand CreateBox an env of their own
// (tests/box/fake_backend.h) to check the Box's lifecycle, deadlines and error reporting
// without root, an image or a jail. Not part of the public API.
#ifndef CODEBOX_BOX_BOX_INTERNAL_H_
#define CODEBOX_BOX_BOX_INTERNAL_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "box/backend.h"
#include "codebox/box.h"
#include "codebox/options.h"
#include "codebox/status.h"
#include "net/egress_relay.h"

namespace codebox {

// What a Box does, by where it runs: box.cc's LocalBox (a driver in this process) or
// src/remote's RemoteBox (a box on a codebox server). Box forwards every call.
class Box::Impl {
 public:
  virtual ~Impl() = default;
  virtual StatusOr<ExecResult> Exec(std::vector<std::string> argv, const ExecOptions& options) = 0;
  virtual StatusOr<std::unique_ptr<Process>> Start(std::vector<std::string> argv,
                                                   const ExecOptions& options) = 0;
  virtual StatusOr<std::unique_ptr<Process>> Attach(int pid, const ExecOptions& options) = 0;
  virtual StatusOr<std::vector<ProcessInfo>> Processes() = 0;
  // `tree`: SIGKILL to everything the process started (Box::KillProcess).
  virtual Status SignalProcess(int pid, int sig, bool tree) = 0;
  virtual Status SendStdin(int pid, std::string_view data, bool close) = 0;
  // `python3 -c code`; LocalBox hands it to a prewarmed interpreter when one waits.
  virtual StatusOr<ExecResult> RunPython(std::string_view code, const ExecOptions& options) {
    return Exec({"python3", "-c", std::string(code)}, options);
  }
  virtual StatusOr<Execution> RunCode(std::string_view code, const RunCodeOptions& options) = 0;
  virtual Status RestartKernel() = 0;
  virtual Status InterruptCode() = 0;
  virtual Status Prewarm(const PrewarmOptions& options) = 0;
  virtual Status CopyIn(const std::string& host_path, const std::string& box_path) = 0;
  virtual Status CopyOut(const std::string& box_path, const std::string& host_path,
                         const CopyOutOptions& options) = 0;
  virtual Status WriteFile(const std::string& box_path, std::string_view data, uint32_t mode) = 0;
  virtual StatusOr<std::string> ReadFile(const std::string& box_path, uint64_t max_bytes) = 0;
  virtual StatusOr<std::vector<FileEntry>> ListDir(const std::string& box_path) = 0;
  virtual Status Remove(const std::string& box_path) = 0;
  virtual Status Destroy() = 0;
  virtual const BoxInfo& info() const = 0;
  virtual std::vector<EgressRecord> EgressLog() const = 0;
  virtual StatusOr<ExecResult> InstallPackages(const std::vector<std::string>& packages,
                                               const InstallOptions& options) = 0;

  // Box's constructor is private; Impl, a member, may call it.
  static std::unique_ptr<Box> Wrap(std::unique_ptr<Impl> impl);
};

}  // namespace codebox

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

// A box of this process (box.cc's LocalBox) on a started backend and its connected agent:
// its network started and its workdir made.
StatusOr<std::unique_ptr<Box>> MakeLocalBox(const BoxOptions& options,
                                            std::unique_ptr<Backend> backend,
                                            std::unique_ptr<protocol::AgentClient> agent,
                                            BoxEnv& env);

// Box::Create on `env`. The env is used only during the call.
StatusOr<std::unique_ptr<Box>> CreateBox(const BoxOptions& options, BoxEnv& env);

}  // namespace codebox::box

#endif  // CODEBOX_BOX_BOX_INTERNAL_H_
