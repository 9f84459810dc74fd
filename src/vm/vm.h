// The vm driver's boundary: each box a QEMU microvm with its own kernel. The agent is /init
// of an initramfs codebox assembles; the image is a read-only erofs virtio-blk disk; the
// protocol runs over a virtio-serial port bound to a unix socket on the host.
#ifndef CODEBOX_VM_VM_H_
#define CODEBOX_VM_VM_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "codebox/status.h"

namespace codebox::vm {

enum class Accelerator { kKvm, kTcg };

// Why kvm cannot be used, in the order the probe finds out.
enum class KvmState {
  kUsable,
  kMissing,     // no /dev/kvm: no kvm module, or a container without the device
  kNoAccess,    // /dev/kvm is there but this user may not open it (not in its group)
  kNoHardware,  // it opens, but the CPU has no vmx/svm (a paravirtual KVM such as PVM)
  kBroken,      // it opens on a capable CPU, but refuses what QEMU needs (or no QEMU)
};

struct AcceleratorProbe {
  bool kvm_usable = false;   // hardware virtualization that boots a guest
  KvmState kvm_state = KvmState::kMissing;
  std::string kvm_reason;    // why not, e.g. "/dev/kvm is PVM: no vmx/svm cpu flag"
  bool tcg_usable = false;   // qemu-system-x86_64 present
  std::string tcg_reason;
};
// Cheap after the first call (cached per process).
AcceleratorProbe ProbeAccelerators();

struct VmConfig {
  std::string home;        // codebox store (kernel, initramfs, erofs disks live there)
  std::string image_tree;  // image rootfs tree; turned into an erofs disk once, cached
  std::string agent_path;  // host path of the static codebox-agent (goes into the initramfs)
  bool allow_emulation = false;
  uint64_t memory_mib = 512;
  uint32_t cpus = 1;
  uint64_t disk_mib = 256;     // size of the writable tmpfs overlay in the guest
  uint64_t max_processes = 0;  // the execs' pids limit in the guest (guest_limits.h); 0 = none
  std::chrono::milliseconds start_timeout{60'000};
  // Restore from a template of this configuration (snapshot.h), made by the first box that
  // needs it, instead of booting. When a restore fails: a cold boot with Machine::warning()
  // set, or with snapshot_fallback off, the error.
  bool snapshot = true;
  bool snapshot_fallback = true;
};

struct QemuLaunch;
struct TemplateInfo;

class Machine {
 public:
  // Prepares kernel/initramfs/disk if needed (cached), starts QEMU, returns once the
  // virtio-serial socket is connected. kUnavailable when no accelerator is allowed here,
  // kStartFailed with the console's last lines when the guest does not come up.
  static StatusOr<std::unique_ptr<Machine>> Start(const VmConfig& config);
  // Start, but a machine restored from a template is left paused ("parked"): QEMU has started
  // and loaded the template's state, which is most of a restore's time. Resume() runs it. A
  // machine that was booted instead (snapshot off, or the fallback) runs already.
  static StatusOr<std::unique_ptr<Machine>> StartParked(const VmConfig& config);
  // Runs a parked machine and returns once it runs; nothing for one that runs already.
  Status Resume(std::chrono::milliseconds timeout);
  ~Machine();  // Destroy()

  base::UniqueFd TakeAgentFd();
  // Stops QEMU (within 1 s) and removes its sockets and files. Idempotent.
  Status Destroy();
  // "vm/kvm" or "vm/tcg".
  std::string driver_name() const;
  // Last lines of the guest console, for errors (box_crashed, start_failed).
  std::string ConsoleTail(size_t max_lines = 20) const;
  bool Alive() const;
  const std::vector<std::string>& limits() const;
  // QEMU's pid (for host RSS figures and tests that kill it from outside); -1 once reaped.
  int qemu_pid() const;
  // The template this machine was restored from ("" when it booted): its agent has sent its
  // hello to the template's host and waits for this host's (GuestSetup::resend_hello).
  const std::string& template_key() const;
  // Why a machine asked to restore was booted instead; "" when it was not.
  const std::string& warning() const;

  class Impl;

 private:
  explicit Machine(std::unique_ptr<Impl> impl);
  // Starts QEMU under its keeper (state_fd: a restore's state file, or -1).
  static StatusOr<std::unique_ptr<Machine>> Launch(const VmConfig& config, QemuLaunch launch,
                                                   int state_fd);
  static StatusOr<std::unique_ptr<Machine>> StartMachine(const VmConfig& config, bool park);
  static StatusOr<std::unique_ptr<Machine>> Restore(const VmConfig& config,
                                                    const QemuLaunch& launch, bool park);
  static StatusOr<TemplateInfo> MakeTemplate(const VmConfig& config, const QemuLaunch& launch,
                                             const std::string& key);
  Status WaitForAgent(std::chrono::milliseconds timeout);
  Status RestoreState(std::chrono::milliseconds timeout, bool park);
  // Polls QMP query-status until it says `status` ("paused", "running").
  Status WaitForStatus(const std::string& status, std::chrono::steady_clock::time_point deadline);
  // Reads the agent's hello, stops the guest and saves its state (the last query-migrate).
  StatusOr<std::string> SaveState(const std::string& state_path, std::chrono::milliseconds timeout);
  std::unique_ptr<Impl> impl_;
};

}  // namespace codebox::vm

#endif  // CODEBOX_VM_VM_H_
