#include "vm/guest_limits.h"

#include "base/random.h"

namespace codebox::vm {

uint64_t GuestExecMemoryBytes(uint64_t memory_mib) {
  // Outside the programs' cgroup: what the kernel keeps for itself (MemTotal of a 512 MiB
  // guest is 470 MiB; its memory map grows with the RAM), its unreclaimable slab, and the agent
  // with its buffers. 64 MiB plus 1/32 of the RAM leaves a 512 MiB guest about 38 MiB of its
  // MemTotal outside the cgroup, so the cgroup's OOM killer acts before the guest's own would.
  const uint64_t ram = memory_mib << 20;
  const uint64_t reserve = (64ull << 20) + ram / 32;
  // A small guest (the vm driver's least is 128 MiB) gives its programs half.
  return ram > 2 * reserve ? ram - reserve : ram / 2;
}

std::vector<std::string> GuestLimitLines(const VmConfig& config) {
  std::vector<std::string> lines = {"programs' memory " +
                                    std::to_string(GuestExecMemoryBytes(config.memory_mib) >> 20) +
                                    " MiB of the guest RAM (guest cgroup v2, no swap)"};
  if (config.max_processes > 0) {
    lines.push_back("processes " + std::to_string(config.max_processes) +
                    " (guest cgroup v2 pids)");
  }
  return lines;
}

protocol::msg::GuestSetup MakeGuestSetup(const Machine& machine, const VmConfig& config) {
  protocol::msg::GuestSetup setup;
  setup.entropy = base::RandomBytes(protocol::msg::kGuestEntropyBytes);
  // A clone's first hello went to the host that made its template.
  setup.resend_hello = !machine.template_key().empty();
  setup.max_processes = static_cast<int64_t>(config.max_processes);
  setup.memory_bytes = static_cast<int64_t>(GuestExecMemoryBytes(config.memory_mib));
  return setup;
}

}  // namespace codebox::vm
