// Guest-side init duties when codebox-agent is /init of a vm box's initramfs: load the
// virtio/erofs/overlay modules, mount the image disk read-only with a tmpfs overlay, mount
// /proc, /dev, /sys, switch root, and open the virtio-serial port that carries the protocol.
#ifndef CODEBOX_AGENT_VM_GUEST_H_
#define CODEBOX_AGENT_VM_GUEST_H_

#include "base/unique_fd.h"
#include "codebox/status.h"
#include "protocol/messages.h"

namespace codebox::agent {

// Called by main() when the agent runs as PID 1 without --fd (that is, inside a vm box).
// Returns the open protocol port.
StatusOr<base::UniqueFd> SetUpVmGuest();

// What the host's hello asks of a vm guest, done before any exec runs. A box restored from a
// template is a byte-for-byte copy of the machine that was saved, so each one is made unique
// here: the kernel RNG gets the host's fresh bytes and is reseeded (RNDADDENTROPY +
// RNDRESEEDCRNG), the clock is set to the host's, boot_id and /etc/machine-id are new, and
// random seeds saved on disk are removed. The execs get a cgroup with the box's pids and
// memory limits (guest_limits.h). An error leaves the box unusable (the host is told).
Status ApplyGuestSetup(const protocol::msg::GuestSetup& setup);

// Called by main() as PID 1 of a vm box after the connection ends or shutdown: sync and
// power the machine off. Does not return.
[[noreturn]] void PowerOffVmGuest();

}  // namespace codebox::agent

#endif  // CODEBOX_AGENT_VM_GUEST_H_
