#include "jail/seccomp_filter.h"

#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace codebox::jail::seccomp {
namespace {

// Refused with EPERM: a program that probes for them degrades gracefully.
constexpr const char* kDenied[] = {
    // Mounts and the root: the box's view of the filesystem is fixed.
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "mount_setattr",
    // New namespaces (clone is filtered by flags below): new user namespaces are the door to
    // most kernel attack surface reachable without privileges.
    "setns",
    // Kernel attack surface with a long CVE record and no use in model code.
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "fanotify_init",
    // Reading or writing other processes (the agent is in the same uid).
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    // File handles bypass path-based checks (the "shocker" escape).
    "open_by_handle_at",
    "name_to_handle_at",
    // Host-wide state.
    "iopl",
    "ioperm",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "quotactl_fd",
    "lookup_dcookie",
    "syslog",
    "vhangup",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "uselib",
    "nfsservctl",
    "_sysctl",
    "vm86",
    "vm86old",
    "mbind",
    "migrate_pages",
    "move_pages",
    "set_mempolicy",
    "set_mempolicy_home_node",
    // Reviewed against Docker's default profile and nsjail: unused by model code.
    "modify_ldt",       // 16-bit segments: a kernel surface with its own CVE record
    "memfd_secret",     // memory the kernel itself cannot read: only useful to hide from us
    "process_madvise",  // acts on another process's memory (Docker: CAP_SYS_PTRACE only)
};

// Socket families model code uses: files and pipes (AF_UNIX), TCP/UDP (the box has only
// loopback), and AF_NETLINK, which glibc's getaddrinfo and `ip` read interfaces with. Every
// other family (AF_VSOCK, AF_ALG, AF_PACKET, AF_KEY, AF_BLUETOOTH, AF_RDS, AF_TIPC, AF_CAN,
// AF_XDP, ...) is protocol code reachable without privileges and with a CVE record.
constexpr uint64_t kSocketFamilies[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};

// Killed outright: nothing legitimate in a box ever tries these, so an attempt is an attack.
constexpr const char* kKilled[] = {
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
};

Status Error(const std::string& what, int rc) {
  return IoError("seccomp: " + what + ": " + std::strerror(-rc));
}

}  // namespace

Status Install() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return IoError("seccomp: seccomp_init failed");
  struct Guard {
    scmp_filter_ctx c;
    ~Guard() { seccomp_release(c); }
  } guard{ctx};
  // Only the native ABI: 32-bit (int 0x80) and x32 syscalls would bypass a filter written for
  // x86_64 numbers, so any other architecture kills the process.
  int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc != 0) return Error("badarch action", rc);

  auto add = [&](uint32_t action, const char* name, unsigned count,
                 const scmp_arg_cmp* args) -> Status {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return Status::Ok();  // not a syscall on this architecture
    int r = seccomp_rule_add_array(ctx, action, nr, count, args);
    if (r != 0 && r != -EOPNOTSUPP) return Error(std::string("rule ") + name, r);
    return Status::Ok();
  };
  for (const char* name : kDenied) RETURN_IF_ERROR(add(SCMP_ACT_ERRNO(EPERM), name, 0, nullptr));
  for (const char* name : kKilled) RETURN_IF_ERROR(add(SCMP_ACT_KILL_PROCESS, name, 0, nullptr));

  // clone3 passes its flags in memory seccomp cannot read: ENOSYS makes glibc fall back to
  // clone, whose flags register we can check.
  RETURN_IF_ERROR(add(SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, nullptr));
  // One rule per flag: libseccomp compares masked values for equality only.
  const uint64_t kNsFlags[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,   CLONE_NEWNET,
                               CLONE_NEWIPC,  CLONE_NEWUTS, CLONE_NEWCGROUP};
  for (uint64_t flag : kNsFlags) {
    scmp_arg_cmp arg = SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag);
    RETURN_IF_ERROR(add(SCMP_ACT_ERRNO(EPERM), "clone", 1, &arg));
    RETURN_IF_ERROR(add(SCMP_ACT_ERRNO(EPERM), "unshare", 1, &arg));
  }
  // CLONE_NEWTIME (0x80) overlaps clone()'s exit-signal byte, so it is checked for unshare only.
  scmp_arg_cmp newtime = SCMP_A0(SCMP_CMP_MASKED_EQ, 0x80, 0x80);
  RETURN_IF_ERROR(add(SCMP_ACT_ERRNO(EPERM), "unshare", 1, &newtime));

  // socket() and socketpair(): only the families above. socketpair counts too: it creates its
  // sockets through the family's code before asking whether pairs are supported.
  // EAFNOSUPPORT is what a kernel without the family answers, which every caller handles.
  // libseccomp compares whole 64-bit registers, so the refused values are the gaps between
  // the allowed ones plus everything above the largest; high garbage bits are refused too.
  {
    uint64_t next = 0;
    std::vector<scmp_arg_cmp> refuse;
    for (uint64_t allowed : kSocketFamilies) {
      // datum_b (unused by EQ and GE) given, as clang's -Wmissing-field-initializers wants.
      for (uint64_t v = next; v < allowed; ++v) refuse.push_back(SCMP_A0(SCMP_CMP_EQ, v, 0));
      next = allowed + 1;
    }
    refuse.push_back(SCMP_A0(SCMP_CMP_GE, next, 0));
    for (const char* name : {"socket", "socketpair"}) {
      for (const scmp_arg_cmp& arg : refuse) {
        RETURN_IF_ERROR(add(SCMP_ACT_ERRNO(EAFNOSUPPORT), name, 1, &arg));
      }
    }
  }

  // TIOCSTI / TIOCLINUX inject keystrokes into a terminal; there is none in a box, but a
  // leaked one must not become a way out.
  for (unsigned long req :
       {static_cast<unsigned long>(TIOCSTI), static_cast<unsigned long>(TIOCLINUX)}) {
    scmp_arg_cmp arg = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, req);
    RETURN_IF_ERROR(add(SCMP_ACT_ERRNO(EPERM), "ioctl", 1, &arg));
  }

  // personality: refuse the flags that weaken memory protections (READ_IMPLIES_EXEC,
  // ADDR_NO_RANDOMIZE, MMAP_PAGE_ZERO, ...). The query value 0xffffffff has bit 31 set, which
  // no real persona has, so "flag set and bit 31 clear" leaves queries alone.
  const uint64_t kBadPersonality[] = {
      0x0400000 /*READ_IMPLIES_EXEC*/, 0x0040000 /*ADDR_NO_RANDOMIZE*/,
      0x0100000 /*MMAP_PAGE_ZERO*/,    0x0200000 /*ADDR_COMPAT_LAYOUT*/,
      0x8000000 /*ADDR_LIMIT_3GB*/,    0x0800000 /*ADDR_LIMIT_32BIT*/,
      0x4000000 /*STICKY_TIMEOUTS*/,   0x0080000 /*FDPIC_FUNCPTRS*/};
  for (uint64_t bit : kBadPersonality) {
    scmp_arg_cmp arg = SCMP_A0(SCMP_CMP_MASKED_EQ, bit | 0x80000000ull, bit);
    RETURN_IF_ERROR(add(SCMP_ACT_ERRNO(EPERM), "personality", 1, &arg));
  }

  rc = seccomp_load(ctx);
  if (rc != 0) return Error("load", rc);
  return Status::Ok();
}

}  // namespace codebox::jail::seccomp
