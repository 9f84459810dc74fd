// Kernel modules the guest needs before it can reach its disk and its port, resolved with
// their dependencies (read from each module's .modinfo "depends=", because the kernel
// package ships no modules.dep: depmod makes it at install time, and we never install).
#ifndef CODEBOX_VM_MODULES_H_
#define CODEBOX_VM_MODULES_H_

#include <string>
#include <vector>

#include "codebox/status.h"

namespace codebox::vm {

// What the guest init loads, in this order after dependency resolution.
inline const std::vector<std::string>& GuestModules() {
  static const std::vector<std::string> kModules = {"virtio_mmio", "virtio_blk", "virtio_console",
                                                    "erofs", "overlay"};
  return kModules;
}

struct ModuleFile {
  std::string name;  // "virtio_ring"
  std::string data;  // plain ELF .ko (decompressed if the package ships .ko.xz/.zst/.gz)
};

// Resolves `wanted` and their dependencies under `modules_dir` (a lib/modules/<release>
// tree), dependencies first. Modules the kernel has built in are skipped.
StatusOr<std::vector<ModuleFile>> ResolveModules(const std::string& modules_dir,
                                                 const std::vector<std::string>& wanted);

// The value of `key=` in a module's .modinfo ELF section (e.g. "depends"). Exposed for tests.
StatusOr<std::string> ModinfoField(const std::string& elf, const std::string& key);

}  // namespace codebox::vm

#endif  // CODEBOX_VM_MODULES_H_
