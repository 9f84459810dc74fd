#include "vm/qemu.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "base/io.h"
#include "base/text.h"
#include "base/unique_fd.h"

namespace codebox::vm {

std::string GuestCommandLine(const QemuLaunch& launch) {
  // console=ttyS0: the serial log the host keeps. quiet: every console byte is slow under
  // emulation. panic=-1 + reboot=t with -no-reboot: a guest panic ends QEMU at once, so the
  // host sees the box die instead of a hung VM. cryptomgr.notests skips self-tests that
  // cost ~0.1 s under tcg and prove nothing about the host. 8250.nr_uarts=1: only ttyS0.
  std::string cmdline =
      "console=ttyS0 quiet panic=-1 reboot=t cryptomgr.notests 8250.nr_uarts=1 "
      "random.trust_cpu=on codebox.disk=" +
      std::to_string(launch.disk_mib) + "M";
  if (launch.accel == Accelerator::kTcg && launch.tsc_khz > 0) {
    cmdline += " tsc_early_khz=" + std::to_string(launch.tsc_khz);
  }
  return cmdline;
}

std::vector<std::string> QemuArgv(const QemuLaunch& launch) {
  bool kvm = launch.accel == Accelerator::kKvm;
  std::vector<std::string> argv = {
      launch.qemu,
      // acpi stays on: the cloud kernel finds virtio-mmio devices through ACPI only
      // (CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES is off), and powers off through it.
      "-M",
      std::string("microvm,pit=off,pic=off,rtc=on,accel=") + (kvm ? "kvm" : "tcg"),
      // tcg: the default qemu64 model boots ~20% faster than "max" (fewer features to emulate).
      "-cpu",
      kvm ? "host" : "qemu64",
      "-m",
      std::to_string(launch.memory_mib) + "M",
      "-smp",
      std::to_string(launch.cpus),
      "-nodefaults",
      "-no-user-config",
      "-nographic",
      "-no-reboot",
      "-nic",
      "none",  // no network device at all; the box has only lo
      // QEMU's own seccomp filter: no exec, no privilege changes, no obsolete syscalls.
      "-sandbox",
      "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
      "-kernel",
      launch.kernel,
      "-initrd",
      launch.initramfs,
      "-append",
      GuestCommandLine(launch),
      "-chardev",
      "file,id=console,path=" + launch.console_log,
      "-serial",
      "chardev:console",
      // One shared image file for many boxes: read-only, so no locking and no writes back.
      "-drive",
      "id=image,file=" + launch.disk + ",format=raw,if=none,readonly=on",
      "-device",
      "virtio-blk-device,drive=image",
      "-device",
      "virtio-serial-device,max_ports=2",
      "-chardev",
      "socket,id=agent,fd=" + std::to_string(kQemuAgentFd) + ",server=off",
      "-device",
      std::string("virtserialport,chardev=agent,name=") + kAgentPortName,
      "-chardev",
      "socket,id=qmp,fd=" + std::to_string(kQemuQmpFd) + ",server=off",
      "-mon",
      "chardev=qmp,mode=control",
  };
  if (!launch.memory_file.empty()) {
    argv[2] += ",memory-backend=ram";
    argv.insert(argv.end(),
                {"-object",
                 "memory-backend-file,id=ram,size=" + std::to_string(launch.memory_mib) +
                     "M,mem-path=" + launch.memory_file +
                     (launch.share_memory ? ",share=on" : ",share=off")});
  }
  if (launch.incoming) argv.insert(argv.end(), {"-incoming", "defer"});
  return argv;
}

Status QmpQuit(int qmp_fd) {
  // QMP answers the greeting-less pipeline in order; the replies are never read because
  // QEMU's exit is the answer we wait for.
  return base::WriteAll(qmp_fd, "{\"execute\":\"qmp_capabilities\"}\n{\"execute\":\"quit\"}\n")
      .WithContext("qmp quit");
}

namespace {

// `byte` with `fds` attached, for QMP's getfd.
Status SendWithFds(int sock, char byte, const std::vector<int>& fds) {
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()), 0);
  struct iovec iov = {&byte, 1};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  struct cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
  for (;;) {
    if (::sendmsg(sock, &msg, MSG_NOSIGNAL) == 1) return Status::Ok();
    if (errno != EINTR) return base::ErrnoStatus("send fds");
  }
}

}  // namespace

StatusOr<std::string> QmpRun(int qmp_fd, const std::vector<std::string>& commands,
                             std::chrono::milliseconds timeout, const std::vector<int>& fds) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string out;
  for (const std::string& c : commands) out += c + "\n";
  if (!fds.empty()) {
    RETURN_IF_ERROR(SendWithFds(qmp_fd, out[0], fds).WithContext("qmp"));
    out.erase(0, 1);
  }
  RETURN_IF_ERROR(base::WriteAll(qmp_fd, out).WithContext("qmp"));
  // One answer per command, {"return": ...} or {"error": ...}, among events (and the greeting).
  size_t answered = 0;
  std::string buf, last;
  while (answered < commands.size()) {
    size_t nl = buf.find('\n');
    if (nl != std::string::npos) {
      std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      if (line.find("\"error\"") != std::string::npos && line.find("\"event\"") == std::string::npos) {
        return Internal("qmp: " + base::TerminalSafe(line, 300));
      }
      if (line.find("\"return\"") != std::string::npos) {
        ++answered;
        last = line;
      }
      continue;
    }
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return DeadlineExceeded("qmp: QEMU did not answer in time");
    struct pollfd p = {qmp_fd, POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno != EINTR) return base::ErrnoStatus("qmp: poll");
    if (rc <= 0) continue;
    char chunk[4096];
    ssize_t n = ::recv(qmp_fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return Unavailable("qmp: QEMU closed its monitor");
    buf.append(chunk, static_cast<size_t>(n));
    if (buf.size() > (1u << 20)) return Internal("qmp: an answer without end");
  }
  return last;
}

bool WaitChild(pid_t pid, std::chrono::milliseconds timeout, int* wstatus) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  base::UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  for (;;) {
    pid_t got = ::waitpid(pid, wstatus, WNOHANG);
    if (got == pid) return true;
    if (got < 0 && errno != EINTR) return true;  // not our child any more (reaped elsewhere)
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (pidfd.valid()) {
      struct pollfd p = {pidfd.get(), POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left.count()));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(5, left.count())));
    }
  }
}

std::string ConsoleExcerpt(const std::string& console, size_t max_lines) {
  std::string clean;
  for (char c : console) {
    if (c != '\r') clean.push_back(c);
  }
  std::string tail = base::TailLines(clean, max_lines);
  size_t panic = clean.find("Kernel panic");
  if (panic == std::string::npos || tail.find("Kernel panic") != std::string::npos) return tail;
  size_t start = clean.rfind('\n', panic);
  start = start == std::string::npos ? 0 : start + 1;
  size_t end = clean.find('\n', panic);
  return clean.substr(start, end == std::string::npos ? std::string::npos : end - start) +
         "\n...\n" + tail;
}

}  // namespace codebox::vm
