// codebox::Box, the facade: Box::Create picks where the box runs (a box on a codebox server,
// src/remote's RemoteBox, or one this process starts, local_box.cc's LocalBox), and each of its
// methods forwards to that Impl.
#include "codebox/box.h"

#include "box/local_box.h"
#include "box_impl/box_impl.h"
#include "remote/remote_box.h"

namespace codebox {

Box::Box(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Box::~Box() = default;

std::unique_ptr<Box> Box::Impl::Wrap(std::unique_ptr<Impl> impl) {
  return std::unique_ptr<Box>(new Box(std::move(impl)));
}

StatusOr<std::unique_ptr<Box>> Box::Create(const BoxOptions& options) {
  if (!options.server.empty()) {
    // The server starts the box and checks the options again; nothing of this host's image
    // store or drivers is looked at.
    RETURN_IF_ERROR(options.Validate().WithContext("create box"));
    ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, remote::CreateRemoteBox(options));
    return Impl::Wrap(std::move(impl));
  }
  return box::CreateBox(options, box::BoxEnv::Default());
}

StatusOr<ExecResult> Box::Exec(const std::vector<std::string>& argv, const ExecOptions& options) {
  return impl_->Exec(argv, options);
}

StatusOr<std::unique_ptr<Process>> Box::Start(const std::vector<std::string>& argv,
                                              const ExecOptions& options) {
  return impl_->Start(argv, options);
}

StatusOr<std::unique_ptr<Process>> Box::Attach(int pid, const ExecOptions& options) {
  return impl_->Attach(pid, options);
}
StatusOr<std::vector<ProcessInfo>> Box::Processes() { return impl_->Processes(); }
Status Box::KillProcess(int pid) { return impl_->SignalProcess(pid, 9, /*tree=*/true); }
Status Box::SignalProcess(int pid, int sig) { return impl_->SignalProcess(pid, sig, false); }
Status Box::SendStdin(int pid, std::string_view data, bool close) {
  return impl_->SendStdin(pid, data, close);
}

StatusOr<ExecResult> Box::RunPython(std::string_view code, const ExecOptions& options) {
  return impl_->RunPython(code, options);
}

StatusOr<std::string> Box::Run(std::string_view code) {
  ASSIGN_OR_RETURN(ExecResult result, RunPython(code));
  if (result.timed_out) {
    return DeadlineExceeded("the code timed out after " + std::to_string(result.duration.count()) +
                            " ms; stdout so far: " + result.stdout_data.substr(0, 2000));
  }
  return std::move(result.stdout_data);
}

StatusOr<Execution> Box::RunCode(std::string_view code, const RunCodeOptions& options) {
  return impl_->RunCode(code, options);
}
Status Box::RestartKernel(std::string_view session) { return impl_->RestartKernel(session); }
Status Box::EndCodeSession(std::string_view session) { return impl_->EndCodeSession(session); }
Status Box::InterruptCode(std::string_view session) { return impl_->InterruptCode(session); }
Status Box::Prewarm(const PrewarmOptions& options) { return impl_->Prewarm(options); }

Status Box::CopyIn(const std::string& host_path, const std::string& box_path) {
  return impl_->CopyIn(host_path, box_path);
}

Status Box::CopyOut(const std::string& box_path, const std::string& host_path,
                    const CopyOutOptions& options) {
  return impl_->CopyOut(box_path, host_path, options);
}

Status Box::WriteFile(const std::string& box_path, std::string_view data, uint32_t mode) {
  return impl_->WriteFile(box_path, data, mode);
}

StatusOr<std::string> Box::ReadFile(const std::string& box_path, uint64_t max_bytes) {
  return impl_->ReadFile(box_path, max_bytes);
}

StatusOr<std::vector<FileEntry>> Box::ListDir(const std::string& box_path) {
  return impl_->ListDir(box_path);
}

Status Box::Remove(const std::string& box_path) { return impl_->Remove(box_path); }

const BoxInfo& Box::info() const { return impl_->info(); }
std::vector<EgressRecord> Box::EgressLog() const { return impl_->EgressLog(); }
StatusOr<BoxUsage> Box::Usage() const { return impl_->Usage(); }
StatusOr<ExecResult> Box::InstallPackages(const std::vector<std::string>& packages,
                                          const InstallOptions& options) {
  return impl_->InstallPackages(packages, options);
}
Status Box::SetNetwork(NetworkMode network, const std::vector<std::string>& allow_hosts) {
  return impl_->SetNetwork(network, allow_hosts);
}

Status Box::Destroy() { return impl_->Destroy(); }

}  // namespace codebox
