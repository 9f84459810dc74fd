// The limits a vm box's agent enforces inside the guest (src/agent/guest_limits.h): the
// execs' cgroup gets the box's process limit and most of the guest's RAM.
#ifndef CODEBOX_VM_GUEST_LIMITS_H_
#define CODEBOX_VM_GUEST_LIMITS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/messages.h"
#include "vm/vm.h"

namespace codebox::vm {

// How much of a guest with `memory_mib` of RAM the execs' cgroup may use, in bytes: the RAM
// less a reserve for the kernel and the agent (see the .cc); half of a small guest's RAM.
uint64_t GuestExecMemoryBytes(uint64_t memory_mib);

// The lines the guest's limits add to the box's limits (BoxInfo) when the host sends them
// (VmBackend::GuestSetup), e.g. "processes 128 (guest cgroup v2 pids)"; the machine's own
// lines (Machine::limits: RAM, vCPUs, disk) say what QEMU enforces.
std::vector<std::string> GuestLimitLines(const VmConfig& config);

// What the host's hello tells the agent of `machine`, started from `config`, before any exec
// (src/agent/vm_guest.cc, ApplyGuestSetup): fresh host entropy, the execs' limits, and
// resend_hello when the machine was restored from a template. The clock is set by
// AgentClient::Connect as it sends the hello.
protocol::msg::GuestSetup MakeGuestSetup(const Machine& machine, const VmConfig& config);

}  // namespace codebox::vm

#endif  // CODEBOX_VM_GUEST_LIMITS_H_
