// The guest kernel: the Debian cloud kernel package, fetched with apt-get download and
// unpacked (never installed) into <home>/kernels/<release>/. Cached: fetched once.
#ifndef CODEBOX_VM_KERNEL_H_
#define CODEBOX_VM_KERNEL_H_

#include <string>

#include "codebox/status.h"

namespace codebox::vm {

struct Kernel {
  std::string release;      // "6.1.0-57-cloud-amd64" (uname -r inside the guest)
  std::string dir;          // <home>/kernels/<release>
  std::string vmlinuz;      // <dir>/vmlinuz
  std::string modules_dir;  // <dir>/modules (the package's lib/modules/<release>)
  std::string package;      // "linux-image-6.1.0-57-cloud-amd64 6.1.192-3"
};

// The meta package whose dependency names the current cloud kernel.
inline constexpr const char* kKernelMetaPackage = "linux-image-cloud-amd64";

// The cached kernel (<home>/kernels/default names it), else fetches it. kUnavailable with
// the command that fixes it when apt cannot provide the package.
StatusOr<Kernel> EnsureKernel(const std::string& home);

// The cached kernel only; kNotFound when none was fetched yet.
StatusOr<Kernel> FindCachedKernel(const std::string& home);

}  // namespace codebox::vm

#endif  // CODEBOX_VM_KERNEL_H_
