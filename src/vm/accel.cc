#include "vm/accel.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "base/io.h"
#include "base/subprocess.h"
#include "base/unique_fd.h"

namespace codebox::vm {
namespace {

bool CpuHasFlag(const std::string& cpuinfo, const std::string& flag) {
  std::istringstream lines(cpuinfo);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) {
      if (w == flag) return true;
    }
    return false;  // the first CPU's flags speak for all
  }
  return false;
}

std::string GroupName(gid_t gid) {
  struct group entry;
  struct group* found = nullptr;
  char buffer[4096];
  if (::getgrgid_r(gid, &entry, buffer, sizeof buffer, &found) == 0 && found != nullptr) {
    return found->gr_name;
  }
  return std::to_string(gid);
}

// What this user can do about a /dev/kvm it may not open: join its group, or have an admin
// give it one (a node only root's group may open is how some distributions ship it).
std::string NoAccessHint(const std::string& group) {
  if (!group.empty() && group != "root" && group != "0") {
    return "add yourself to group " + group + ": sudo usermod -aG " + group +
           " $USER, then log in again";
  }
  return "it belongs to group root: an admin makes it group kvm, mode 0660 (a udev rule: "
         "KERNEL==\"kvm\", GROUP=\"kvm\", MODE=\"0660\") and adds you to group kvm (sudo "
         "usermod -aG kvm $USER, then log in again)";
}

}  // namespace

std::string QemuBinary() {
  if (const char* v = std::getenv("CODEBOX_QEMU"); v != nullptr && *v != '\0') {
    return ::access(v, X_OK) == 0 ? std::string(v) : "";
  }
  return base::FindProgram("qemu-system-x86_64");
}

KvmFacts ReadKvmFacts(const std::string& device) {
  KvmFacts facts;
  auto cpuinfo = base::ReadFile("/proc/cpuinfo");
  facts.cpu_virtualization =
      cpuinfo.ok() && (CpuHasFlag(*cpuinfo, "vmx") || CpuHasFlag(*cpuinfo, "svm"));
  struct stat st;
  if (::stat(device.c_str(), &st) == 0) facts.group = GroupName(st.st_gid);
  base::UniqueFd kvm(::open(device.c_str(), O_RDWR | O_CLOEXEC));
  if (!kvm.valid()) {
    facts.open_errno = errno;
    return facts;
  }
  // PVM and similar paravirtual KVMs expose /dev/kvm without VT-x/AMD-V; stock kernels
  // hang or fault under them, so we must not pick it (and must not hang probing it).
  if (!facts.cpu_virtualization) return facts;
  facts.api_version = ::ioctl(kvm.get(), KVM_GET_API_VERSION, 0);
  if (facts.api_version != KVM_API_VERSION) return facts;
  // A VM fd proves the module accepts guests (not only that the node exists).
  base::UniqueFd vm(::ioctl(kvm.get(), KVM_CREATE_VM, 0));
  if (!vm.valid()) facts.create_vm_errno = errno;
  return facts;
}

AcceleratorProbe JudgeAccelerators(const KvmFacts& kvm, bool qemu_found) {
  static_assert(KVM_API_VERSION == 12, "KvmFacts::api_version's default");
  AcceleratorProbe probe;
  if (kvm.open_errno == ENOENT) {
    probe.kvm_state = KvmState::kMissing;
    probe.kvm_reason = "/dev/kvm is missing";
  } else if (kvm.open_errno == EACCES || kvm.open_errno == EPERM) {
    probe.kvm_state = KvmState::kNoAccess;
    probe.kvm_reason =
        std::string("/dev/kvm: ") + std::strerror(kvm.open_errno) + "; " + NoAccessHint(kvm.group);
  } else if (kvm.open_errno != 0) {
    probe.kvm_state = KvmState::kBroken;
    probe.kvm_reason = std::string("/dev/kvm is not usable: ") + std::strerror(kvm.open_errno);
  } else if (!kvm.cpu_virtualization) {
    probe.kvm_state = KvmState::kNoHardware;
    probe.kvm_reason =
        "/dev/kvm is present but the CPU has no vmx/svm flag (a paravirtual KVM such as PVM, "
        "which stock guest kernels do not boot under)";
  } else if (kvm.api_version != KVM_API_VERSION) {
    probe.kvm_state = KvmState::kBroken;
    probe.kvm_reason =
        "/dev/kvm answers KVM_GET_API_VERSION with " + std::to_string(kvm.api_version);
  } else if (kvm.create_vm_errno != 0) {
    probe.kvm_state = KvmState::kBroken;
    probe.kvm_reason =
        std::string("/dev/kvm refuses KVM_CREATE_VM: ") + std::strerror(kvm.create_vm_errno);
  } else {
    probe.kvm_state = KvmState::kUsable;
    probe.kvm_usable = true;
  }
  if (!qemu_found) {
    probe.tcg_reason = "qemu-system-x86_64 not found (run: apt-get install qemu-system-x86)";
    if (probe.kvm_usable) {
      probe.kvm_usable = false;
      probe.kvm_state = KvmState::kBroken;
      probe.kvm_reason = probe.tcg_reason;
    }
  } else {
    probe.tcg_usable = true;
  }
  return probe;
}

std::string KvmUnavailableReason(const AcceleratorProbe& probe) {
  switch (probe.kvm_state) {
    case KvmState::kUsable:
      return "";
    // The hardware may well be there: what is missing is this user's access, or software.
    case KvmState::kNoAccess:
      return probe.kvm_reason;
    case KvmState::kBroken:
      return "kvm is not usable here (" + probe.kvm_reason + ")";
    case KvmState::kMissing:
    case KvmState::kNoHardware:
      break;
  }
  return "no hardware virtualization on this host (" + probe.kvm_reason + ")";
}

AcceleratorProbe ProbeAccelerators() {
  static std::once_flag once;
  static AcceleratorProbe probe;
  std::call_once(once, [] { probe = JudgeAccelerators(ReadKvmFacts(), !QemuBinary().empty()); });
  return probe;
}

StatusOr<Accelerator> ChooseAccelerator(bool allow_emulation) {
  AcceleratorProbe probe = ProbeAccelerators();
  if (probe.kvm_usable) return Accelerator::kKvm;
  if (allow_emulation && probe.tcg_usable) return Accelerator::kTcg;
  if (allow_emulation) return Unavailable("vm driver: " + probe.tcg_reason);
  return Unavailable("vm driver: " + KvmUnavailableReason(probe) +
                     "; use --driver jail or --allow-emulation");
}

uint64_t HostTscKhz() {
  // "cpu MHz" is the nominal clock, which is the TSC rate on every CPU with invariant TSC.
  auto cpuinfo = base::ReadFile("/proc/cpuinfo");
  if (cpuinfo.ok()) {
    std::istringstream lines(*cpuinfo);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("cpu MHz", 0) != 0) continue;
      double mhz = std::strtod(line.substr(line.find(':') + 1).c_str(), nullptr);
      if (mhz > 100) return static_cast<uint64_t>(mhz * 1000);
    }
  }
  return 2'000'000;
}

}  // namespace codebox::vm
