// Box::Impl, what a Box does by where it runs: src/box's LocalBox (a driver in this process) or
// src/remote's RemoteBox (a box on a codebox server). An interface and nothing else, so that
// both sides implement it and neither includes the other: the Box facade (src/box) picks one.
// Not part of the public API.
#ifndef CODEBOX_BOX_IMPL_BOX_IMPL_H_
#define CODEBOX_BOX_IMPL_BOX_IMPL_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/box.h"
#include "codebox/status.h"

namespace codebox {

// Box forwards every call to its Impl.
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
  virtual Status RestartKernel(std::string_view session) = 0;
  virtual Status EndCodeSession(std::string_view session) = 0;
  virtual Status InterruptCode(std::string_view session) = 0;
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
  virtual StatusOr<BoxUsage> Usage() const {
    return Unavailable("this box's usage is not measured");
  }
  virtual StatusOr<ExecResult> InstallPackages(const std::vector<std::string>& packages,
                                               const InstallOptions& options) = 0;
  virtual Status SetNetwork(NetworkMode network, const std::vector<std::string>& allow_hosts) = 0;

  // Box's constructor is private; Impl, a member, may call it.
  static std::unique_ptr<Box> Wrap(std::unique_ptr<Impl> impl);
};

}  // namespace codebox

#endif  // CODEBOX_BOX_IMPL_BOX_IMPL_H_
