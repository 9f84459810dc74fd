#include "vm/accel.h"

#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
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

AcceleratorProbe Probe() {
  AcceleratorProbe probe;
  std::string cpuinfo =
      base::ReadFile("/proc/cpuinfo").ok() ? *base::ReadFile("/proc/cpuinfo") : "";
  bool hw = CpuHasFlag(cpuinfo, "vmx") || CpuHasFlag(cpuinfo, "svm");
  base::UniqueFd kvm(::open("/dev/kvm", O_RDWR | O_CLOEXEC));
  int kvm_errno = errno;
  if (!kvm.valid()) {
    probe.kvm_reason =
        std::string("/dev/kvm is ") +
        (kvm_errno == ENOENT ? "missing" : std::string("not usable: ") + std::strerror(kvm_errno));
  } else if (!hw) {
    // PVM and similar paravirtual KVMs expose /dev/kvm without VT-x/AMD-V; stock kernels
    // hang or fault under them, so we must not pick it (and must not hang probing it).
    probe.kvm_reason =
        "/dev/kvm is present but the CPU has no vmx/svm flag (a paravirtual KVM such as PVM, "
        "which stock guest kernels do not boot under)";
  } else if (int api = ::ioctl(kvm.get(), KVM_GET_API_VERSION, 0); api != KVM_API_VERSION) {
    probe.kvm_reason = "/dev/kvm answers KVM_GET_API_VERSION with " + std::to_string(api);
  } else {
    // A VM fd proves the module accepts guests (not only that the node exists).
    base::UniqueFd vm(::ioctl(kvm.get(), KVM_CREATE_VM, 0));
    if (!vm.valid()) {
      probe.kvm_reason = std::string("/dev/kvm refuses KVM_CREATE_VM: ") + std::strerror(errno);
    } else {
      probe.kvm_usable = true;
    }
  }
  if (QemuBinary().empty()) {
    probe.tcg_reason = "qemu-system-x86_64 not found (run: apt-get install qemu-system-x86)";
    if (probe.kvm_usable) {
      probe.kvm_usable = false;
      probe.kvm_reason = probe.tcg_reason;
    }
  } else {
    probe.tcg_usable = true;
  }
  return probe;
}

}  // namespace

std::string QemuBinary() {
  if (const char* v = std::getenv("CODEBOX_QEMU"); v != nullptr && *v != '\0') {
    return ::access(v, X_OK) == 0 ? std::string(v) : "";
  }
  return base::FindProgram("qemu-system-x86_64");
}

AcceleratorProbe ProbeAccelerators() {
  static std::once_flag once;
  static AcceleratorProbe probe;
  std::call_once(once, [] { probe = Probe(); });
  return probe;
}

StatusOr<Accelerator> ChooseAccelerator(bool allow_emulation) {
  AcceleratorProbe probe = ProbeAccelerators();
  if (probe.kvm_usable) return Accelerator::kKvm;
  if (allow_emulation && probe.tcg_usable) return Accelerator::kTcg;
  if (allow_emulation) return Unavailable("vm driver: " + probe.tcg_reason);
  std::string kvm = probe.kvm_reason;
  if (kvm.rfind("/dev/kvm ", 0) == 0) kvm = kvm.substr(9);
  return Unavailable("vm driver: no hardware virtualization on this host (/dev/kvm " + kvm +
                     "); use --driver jail or --allow-emulation");
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
