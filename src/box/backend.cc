#include "box/backend.h"

#include <cerrno>
#include <cmath>

#include "base/log.h"
#include "base/paths.h"
#include "base/proc_stat.h"
#include "box/leftovers.h"
#include "box/spares.h"
#include "jail/jail.h"
#include "vm/accel.h"
#include "vm/guest_limits.h"
#include "vm/snapshot.h"
#include "vm/vm.h"

namespace codebox::box {
namespace {

class JailBackend final : public Backend {
 public:
  explicit JailBackend(std::unique_ptr<jail::Jail> jail) : jail_(std::move(jail)) {}
  base::UniqueFd TakeAgentFd() override { return jail_->TakeAgentFd(); }
  Status Destroy() override { return jail_->Destroy(); }
  uint64_t OomKillCount() const override { return jail_->OomKillCount(); }
  StatusOr<BoxUsage> Usage() const override {
    ASSIGN_OR_RETURN(jail::Usage used, jail_->Usage());
    return BoxUsage{std::chrono::microseconds(used.cpu_usec), used.memory_bytes, used.shmem_bytes};
  }
  BoxInfo Info() const override {
    BoxInfo info;
    info.driver = "jail";
    info.limits = jail_->limits();
    info.limits_not_enforced = jail_->limits_not_enforced();
    return info;
  }

 private:
  std::unique_ptr<jail::Jail> jail_;
};

class VmBackend final : public Backend {
 public:
  VmBackend(std::unique_ptr<vm::Machine> machine, const vm::VmConfig& config)
      : machine_(std::move(machine)), config_(config), limits_(machine_->limits()) {
    std::vector<std::string> guest = vm::GuestLimitLines(config);
    limits_.insert(limits_.begin() + std::min<size_t>(1, limits_.size()), guest.begin(),
                   guest.end());  // after the RAM
  }
  base::UniqueFd TakeAgentFd() override { return machine_->TakeAgentFd(); }
  Status Destroy() override { return machine_->Destroy(); }
  std::string Diagnostics() const override {
    std::string tail = machine_->ConsoleTail(20);
    return tail.empty() ? "" : "last lines of the guest console:\n" + tail;
  }
  BoxInfo Info() const override {
    BoxInfo info;
    info.driver = machine_->driver_name();
    info.limits = limits_;
    info.start = machine_->template_key().empty() ? "boot" : "snapshot " + machine_->template_key();
    if (!machine_->warning().empty()) info.warnings.push_back(machine_->warning());
    for (const std::string& w : added_warnings()) info.warnings.push_back(w);
    return info;
  }
  void DiscardTemplate() override {
    if (!machine_->template_key().empty()) (void)vm::RemoveTemplate(machine_->template_key());
  }
  // Measured on the host, from QEMU's process: nothing the guest says. Its CPU time is all the
  // machine cost (vCPUs and device emulation); its memory the RAM the host gives it, the
  // guest's scratch files (a tmpfs in its RAM) included, with a template's shared pages
  // divided among the clones that map them (PSS). A vm has no scratch outside its RAM.
  StatusOr<BoxUsage> Usage() const override {
    const int pid = machine_->qemu_pid();
    std::optional<std::chrono::microseconds> cpu = base::ProcessCpuTime(pid);
    std::optional<uint64_t> memory = base::ProcessPssBytes(pid);
    if (!cpu || !memory) return Unavailable("the vm's QEMU process has ended");
    return BoxUsage{*cpu, *memory, 0};
  }
  std::optional<protocol::msg::GuestSetup> GuestSetup() const override {
    return vm::MakeGuestSetup(*machine_, config_);
  }

 private:
  std::unique_ptr<vm::Machine> machine_;
  vm::VmConfig config_;
  std::vector<std::string> limits_;  // the machine's, and the guest's (GuestSetup)
};

std::string AgentPath() { return base::FindHelperBinary("codebox-agent"); }

}  // namespace

StatusOr<DriverChoice> ChooseDriver(const BoxOptions& options) {
  const bool want_vm = options.driver == DriverKind::kVm;
  const bool want_jail = options.driver == DriverKind::kJail;
  std::string vm_reason;
  if (!want_jail) {
    vm::AcceleratorProbe probe = vm::ProbeAccelerators();
    if (probe.kvm_usable) return DriverChoice{DriverKind::kVm, false, "vm with kvm"};
    vm_reason = vm::KvmUnavailableReason(probe);
    if (want_vm) {
      if (options.allow_emulation && probe.tcg_usable) {
        return DriverChoice{DriverKind::kVm, true, "vm under tcg emulation (" + vm_reason + ")"};
      }
      if (options.allow_emulation) {
        return Unavailable("vm driver: " + vm_reason + ", and emulation is not possible either (" +
                           probe.tcg_reason + "); use --driver jail");
      }
      return Unavailable("vm driver: " + vm_reason + "; use --driver jail or --allow-emulation");
    }
  }
  // The probe starts a helper process: once per process is enough (as for the vm probe).
  static const Status jail_ok = jail::ProbeJailSupport();
  if (jail_ok.ok()) {
    return DriverChoice{
        DriverKind::kJail, false,
        want_jail ? "jail (asked for)" : "jail: vm not at full speed: " + vm_reason};
  }
  if (want_jail) return Unavailable("jail driver: " + jail_ok.message());
  if (options.allow_emulation && vm::ProbeAccelerators().tcg_usable) {
    return DriverChoice{DriverKind::kVm, true, "vm under tcg emulation (jail unavailable)"};
  }
  return Unavailable("no driver can run here: vm: " + vm_reason + "; jail: " + jail_ok.message());
}

StatusOr<std::unique_ptr<Backend>> StartBackend(const BoxOptions& options,
                                                const DriverChoice& choice,
                                                const image::ImageInfo& image) {
  // The agent, real root in a vm, becomes any user; a jail maps a second id only for root.
  const bool can_switch_user = choice.kind == DriverKind::kVm || jail::CanMapUser();
  ASSIGN_OR_RETURN(image::ImageConfig image_config, ConfigForUser(options, image));
  ASSIGN_OR_RETURN(ImageRun run, PlanImageRun(options, image_config, can_switch_user));
  if (!run.user && run.user_text != "root") {
    CODEBOX_LOG(kWarn, "create box: image " << image.name << ": runs as " << run.user_text);
  }
  // Cleans up after codebox processes that were killed before they could (once per process).
  CollectLeftoversOnce(base::CodeboxHome(options.home));
  std::string agent = AgentPath();
  if (agent.empty()) {
    return NotFound(base::HelperNotFoundMessage("codebox-agent"));
  }
  std::unique_ptr<Backend> backend;
  if (choice.kind == DriverKind::kJail) {
    jail::JailConfig config;
    config.rootfs = image.rootfs;
    config.agent_path = agent;
    config.workdir = run.workdir;
    if (run.user) config.user = jail::BoxUser{run.user->uid, run.user->gid};
    config.memory_bytes = options.memory_mib << 20;
    config.disk_bytes = options.disk_mib << 20;
    config.max_processes = options.max_processes;
    config.max_open_files = options.max_open_files;
    config.cpus = options.cpus;
    ASSIGN_OR_RETURN(auto jail, options.prestart ? TakePrestartedJail(options, config)
                                                 : jail::Jail::Start(config));
    backend = std::make_unique<JailBackend>(std::move(jail));
    backend->set_image_run(std::move(run));
    return backend;
  }
  vm::VmConfig config;
  config.home = base::CodeboxHome(options.home);
  config.image_tree = image.rootfs;
  config.agent_path = agent;
  config.allow_emulation = options.allow_emulation;
  config.memory_mib = options.memory_mib;
  config.cpus = static_cast<uint32_t>(std::max(1.0, std::ceil(options.cpus)));
  config.disk_mib = options.disk_mib;
  config.max_processes = options.max_processes;
  config.snapshot = !options.no_snapshot;
  config.snapshot_fallback = !options.no_fallback;
  ASSIGN_OR_RETURN(auto machine, options.prestart ? TakePrestartedMachine(options, config)
                                                  : vm::Machine::Start(config));
  backend = std::make_unique<VmBackend>(std::move(machine), config);
  backend->set_image_run(std::move(run));
  return backend;
}

StatusOr<std::unique_ptr<Backend>> StartOnImage(const BoxOptions& options,
                                                const image::ImageInfo& image) {
  ASSIGN_OR_RETURN(DriverChoice choice, ChooseDriver(options));
  CODEBOX_LOG(kInfo, "create box: image " << image.id << ", driver " << choice.reason);
  return StartBackend(options, choice, image);
}

}  // namespace codebox::box
