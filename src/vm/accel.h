// Which accelerator QEMU can use here, and host facts the guest's command line needs.
#ifndef CODEBOX_VM_ACCEL_H_
#define CODEBOX_VM_ACCEL_H_

#include <cstdint>
#include <string>

#include "codebox/status.h"
#include "vm/vm.h"

namespace codebox::vm {

// Absolute path of qemu-system-x86_64 ($CODEBOX_QEMU overrides); empty if absent.
std::string QemuBinary();

// The accelerator for a box: kvm when usable, else tcg when emulation is allowed, else
// kUnavailable saying what is missing and which flag/driver to use instead.
StatusOr<Accelerator> ChooseAccelerator(bool allow_emulation);

// Host TSC frequency in kHz. Under tcg the guest's TSC runs at the host's rate and the
// kernel cannot calibrate it (microvm has no PIT/HPET worth trusting), so we tell it
// (tsc_early_khz); a wrong value would make every guest clock run fast or slow.
uint64_t HostTscKhz();

}  // namespace codebox::vm

#endif  // CODEBOX_VM_ACCEL_H_
