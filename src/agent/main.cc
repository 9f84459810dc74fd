// codebox-agent: runs inside every box and serves docs/protocol.md on one stream.
//
//   codebox-agent --fd N [--mount TYPE:TARGET[:OPTIONS]]...   (jail driver, tests)
//                 [--egress-port N]   (tests on the host: another port, 0 = any free one)
//   codebox-agent                                           (as PID 1: /init of a vm box)
#include <signal.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "agent/mount_spec.h"
#include "agent/server.h"
#include "agent/vm_guest.h"
#include "base/io.h"

namespace codebox::agent {
namespace {

// Box code runs as the agent's uid. While the agent is dumpable that code may open
// /proc/1/mem (and environ, maps, fd/, ...) and rewrite PID 1; once it is not, each of those
// needs CAP_SYS_PTRACE over the box's user namespace, which nothing in a box has. execve makes
// a process dumpable again, so the agent does this itself, in a .preinit_array entry: before
// any constructor, allocation or thread of its own runs. Its children inherit "not dumpable"
// until their execve, and the kernel closes their close-on-exec fds (the protocol socket)
// before it makes them dumpable.
void NotDumpable(int, char**, char**) { ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }
[[gnu::section(".preinit_array"), gnu::used]] void (*const kNotDumpable)(int, char**,
                                                                         char**) = NotDumpable;

// A jail whose image names a user starts the agent with root's ids as its real ones and the
// user's as its effective ones (src/jail/privileges.h, HandUserToAgent: nothing in a box holds
// a capability to set ids, and execve copies the effective ids into the saved ones). Root's
// become the effective ids again; the user's stay saved, so an exec's child can become the
// user (a set*id call may always pick an id the process holds) and no one else. The agent
// works on files as the user (its filesystem ids): box root has no CAP_DAC_OVERRIDE, so as
// root it could not write in the user's workdir; so what it writes is the user's too. That
// start was a secure execve, which cleared the parent-death signal: it is set again. (The
// user's processes may signal the agent now, as a saved id allows; as PID 1 it ignores a
// signal whose sender is a process of the box.)
Status TakeBackRoot() {
  uid_t ruid, euid, suid;
  gid_t rgid, egid, sgid;
  if (::getresuid(&ruid, &euid, &suid) != 0 || ::getresgid(&rgid, &egid, &sgid) != 0) {
    return base::ErrnoStatus("getresuid");
  }
  if (ruid != 0 || rgid != 0 || (euid == 0 && egid == 0)) return Status::Ok();
  if (egid != 0 && ::setresgid(0, 0, egid) != 0) return base::ErrnoStatus("take back gid 0");
  if (euid != 0 && ::setresuid(0, 0, euid) != 0) return base::ErrnoStatus("take back uid 0");
  // setfs*id answer the previous id, never an error: asking again (-1 changes nothing) checks.
  ::setfsgid(egid);
  ::setfsuid(euid);
  if (static_cast<gid_t>(::setfsgid(-1)) != egid || static_cast<uid_t>(::setfsuid(-1)) != euid) {
    return Internal("cannot work on files as " + std::to_string(euid) + ":" + std::to_string(egid));
  }
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  return Status::Ok();
}

struct Args {
  int fd = -1;
  std::vector<std::string> mounts;
  std::optional<uint16_t> egress_port;
};

void Usage() {
  std::fputs(
      "usage: codebox-agent --fd N [--mount TYPE:TARGET[:OPTIONS]]... [--egress-port N]\n"
      "       codebox-agent            (as PID 1 of a vm box)\n",
      stderr);
}

StatusOr<Args> ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--fd" || a == "--mount" || a == "--egress-port") && i + 1 >= argc) {
      return InvalidArgument(a + " needs a value");
    }
    if (a == "--fd") {
      char* end = nullptr;
      long fd = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || fd < 0 || fd > 1 << 20)
        return InvalidArgument("bad --fd " + std::string(argv[i]));
      args.fd = static_cast<int>(fd);
    } else if (a == "--egress-port") {
      char* end = nullptr;
      long port = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || port < 0 || port > 65535) {
        return InvalidArgument("bad --egress-port " + std::string(argv[i]));
      }
      args.egress_port = static_cast<uint16_t>(port);
    } else if (a == "--mount") {
      args.mounts.push_back(argv[++i]);
    } else {
      return InvalidArgument("unknown argument " + a);
    }
  }
  return args;
}

Status MountOne(const std::string& spec) {
  ASSIGN_OR_RETURN(MountSpec m, ParseMountSpec(spec));
  ::mkdir(m.target.c_str(), 0755);  // usually exists already; mount says if it does not
  if (::mount(m.type.c_str(), m.target.c_str(), m.type.c_str(), m.flags,
              m.options.empty() ? nullptr : m.options.c_str()) != 0) {
    return base::ErrnoStatus("--mount " + spec);
  }
  return Status::Ok();
}

int Main(int argc, char** argv) {
  // First: a change of ids makes the process dumpable or not anew, which is checked next.
  if (Status st = TakeBackRoot(); !st.ok()) {
    std::fprintf(stderr, "codebox-agent: %s\n", st.message().c_str());
    return 1;
  }
  // Checked, not assumed: should a toolchain drop the .preinit_array entry, this is the
  // latest safe point (nothing of the box runs before the agent execs it).
  if (::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0) {
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    if (::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0) {
      std::fputs("codebox-agent: cannot make itself non-dumpable\n", stderr);
      return 1;
    }
  }
  // Run from a memfd, the kernel names us "memfd:codebox-a"; ps and process counts want ours.
  ::prctl(PR_SET_NAME, "codebox-agent", 0, 0, 0);
  auto args = ParseArgs(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "codebox-agent: %s\n", args.status().message().c_str());
    Usage();
    return 2;
  }
  const bool is_init = ::getpid() == 1;
  for (const std::string& m : args->mounts) {
    if (Status st = MountOne(m); !st.ok()) {
      std::fprintf(stderr, "codebox-agent: %s\n", st.message().c_str());
      return 1;
    }
  }
  base::UniqueFd conn;
  const bool vm_guest = is_init && args->fd < 0;
  if (vm_guest) {
    auto port = SetUpVmGuest();
    if (!port.ok()) {
      std::fprintf(stderr, "codebox-agent: vm guest setup: %s\n", port.status().ToString().c_str());
      PowerOffVmGuest();
    }
    conn = std::move(*port);
  } else if (args->fd >= 0) {
    conn.reset(args->fd);
    // The protocol fd must not leak into the programs the agent runs.
    if (Status st = base::SetCloseOnExec(conn.get(), true); !st.ok()) {
      std::fprintf(stderr, "codebox-agent: --fd %d: %s\n", args->fd, st.message().c_str());
      return 2;
    }
  } else {
    Usage();
    return 2;
  }
  if (!is_init) {
    // Orphaned daemons of an exec reparent to the agent instead of escaping to the host's
    // init, so timeouts and shutdown can still find and kill them.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  }
  Server server(std::move(conn), is_init);
  if (vm_guest) server.set_guest_setup_handler(ApplyGuestSetup);
  if (args->egress_port) {
    // Tests read the port (an ephemeral one with 0) from this line.
    server.set_egress_port(*args->egress_port, [](uint16_t port) {
      std::fprintf(stderr, "codebox-agent: egress port 127.0.0.1:%u\n", port);
    });
  }
  int code = server.Run();
  if (vm_guest) PowerOffVmGuest();
  return code;
}

}  // namespace
}  // namespace codebox::agent

int main(int argc, char** argv) { return codebox::agent::Main(argc, argv); }
