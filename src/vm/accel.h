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

// What the probe of /dev/kvm finds, step by step; a step not reached keeps its default.
struct KvmFacts {
  int open_errno = 0;               // 0: /dev/kvm opened read-write, else open(2)'s errno
  std::string group = {};           // the group /dev/kvm belongs to ("kvm"), when known
  bool cpu_virtualization = false;  // vmx or svm among /proc/cpuinfo's flags
  int api_version = 12;             // KVM_GET_API_VERSION's answer (12 is KVM_API_VERSION)
  int create_vm_errno = 0;          // 0: KVM_CREATE_VM gave a VM
};
KvmFacts ReadKvmFacts(const std::string& device = "/dev/kvm");

// The verdict on kvm and tcg from the facts, with the reason and what to do in words; the
// probe is this over ReadKvmFacts() and whether QEMU was found.
AcceleratorProbe JudgeAccelerators(const KvmFacts& kvm, bool qemu_found);

// Why a vm box gets no kvm here, for errors and doctor: "no hardware virtualization on this
// host (...)", except where the hardware is there and only access is missing ("/dev/kvm:
// Permission denied; add yourself to group kvm: ...").
std::string KvmUnavailableReason(const AcceleratorProbe& probe);

// The accelerator for a box: kvm when usable, else tcg when emulation is allowed, else
// kUnavailable saying what is missing and which flag/driver to use instead.
StatusOr<Accelerator> ChooseAccelerator(bool allow_emulation);

// Host TSC frequency in kHz. Under tcg the guest's TSC runs at the host's rate and the
// kernel cannot calibrate it (microvm has no PIT/HPET worth trusting), so we tell it
// (tsc_early_khz); a wrong value would make every guest clock run fast or slow.
uint64_t HostTscKhz();

}  // namespace codebox::vm

#endif  // CODEBOX_VM_ACCEL_H_
