// Box: one disposable isolated environment that runs untrusted code.
//
//   auto box = codebox::Box::Create({.image = "python"});
//   if (!box.ok()) { /* box.status().message() says why and what to do */ }
//   auto out = (*box)->Run("print(1 + 1)");   // "2\n"
//
// Thread safety: a Box may be used from many threads at once (concurrent execs share it);
// many boxes may exist at once. Destroying the Box (or Destroy()) kills everything in it and
// removes every file, mount and cgroup it made.
#ifndef CODEBOX_BOX_H_
#define CODEBOX_BOX_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/egress.h"
#include "codebox/execution.h"
#include "codebox/options.h"
#include "codebox/process.h"
#include "codebox/status.h"

namespace codebox {

// What a box has used, as its boundary measures it on the host (a jail's cgroup, a vm's QEMU
// process): never the box's own claim.
struct BoxUsage {
  std::chrono::microseconds cpu_time{0};  // CPU time of all its processes since it started
  // Memory charged to it now; a jail's scratch files (tmpfs) are memory, counted here too.
  uint64_t memory_bytes = 0;
  // Bytes its scratch files hold: a jail's tmpfs (in memory_bytes as well). 0 in a vm, where
  // the host cannot tell them apart from the guest's other RAM (memory_bytes has them).
  uint64_t disk_bytes = 0;
};

// What a box enforces, as reported by its driver: honest about what this host allowed.
struct BoxInfo {
  std::string driver;                            // "jail", "vm/kvm", "vm/tcg"
  std::vector<std::string> limits;               // e.g. "memory 512 MiB (cgroup v1)"
  std::vector<std::string> limits_not_enforced;  // with the reason
  // The box's way out: "none", "allow: pypi.org, *.pythonhosted.org" or "open (any public
  // address)".
  std::string network = "none";
  // Who the box's processes run as: "root", or the image's user ("1000:1000", "1000:1000
  // (app)"), or "root (the image's user 1000:1000 cannot be: ...)" where the driver cannot
  // switch to it (a jail without root on the host).
  std::string user = "root";
  // How the box started: "boot", "snapshot KEY" (a vm restored from template KEY); "" (jail).
  std::string start;
  // What did not go as asked but did not stop the box (a vm restore that fell back to a boot).
  std::vector<std::string> warnings;
};

// How Box::InstallPackages runs pip in the box.
struct InstallOptions {
  // The package index (pip's --index-url); empty: the public Python package index. Its host
  // (and, for the public index, the host its files come from) is allowed for this install
  // only.
  std::string index_url = {};
  std::chrono::milliseconds timeout{300'000};
};

// How Box::CopyOut treats what comes out of the box (all of it is the box's choice).
struct CopyOutOptions {
  // Most bytes of file data one CopyOut may write to the host, checked against the size the box
  // claims and against the bytes received; over it the copy fails with kLimitExceeded and leaves
  // nothing behind. 0 = the box's scratch disk size (BoxOptions::disk_mib).
  uint64_t max_bytes = 0;
  // Most files and directories one CopyOut may make.
  uint64_t max_entries = 100'000;
  // Told of each box entry that is not copied (symlinks, FIFOs, sockets, devices), with its box
  // path and why. Unset: they are logged.
  std::function<void(const std::string& box_path, const std::string& why)> on_skipped;
};

// A box entry as ListDir reports it (name and sizes are the box's claim; a name that would make
// `path` leave the directory, "", ".", "..", or one with a '/', fails the listing).
struct FileEntry {
  std::string name;
  std::string path;  // the directory asked for (absolute: a relative one is under the
                     // workdir) + "/" + name
  std::string type;  // "file", "dir", "symlink", "other"
  uint64_t size = 0;
  uint32_t mode = 0;  // permission bits
};

// What Box::Prewarm starts ahead of the first call that needs it.
struct PrewarmOptions {
  // A python3 started and waiting for code: the next RunPython skips the interpreter's start-up
  // and gives the result `python3 -c` gives. Used once. A RunPython it cannot serve starts
  // python3 as usual and leaves it waiting: one whose environment changes a variable python3
  // reads at start-up (PATH, HOME, TZ, LANG, LC_*, PYTHON*, LD_*, MALLOC_*), or a program over
  // 16 MiB. One that died before use (killed by code in the box, or any OOM kill in the box
  // since it started) is noticed, and the program runs cold.
  bool python = true;
  // The code-interpreter kernel started: the next RunCode skips the kernel's start.
  bool kernel = false;
};

class Box {
 public:
  static StatusOr<std::unique_ptr<Box>> Create(const BoxOptions& options);
  ~Box();
  Box(const Box&) = delete;
  Box& operator=(const Box&) = delete;

  // Runs argv[0] (looked up in the box's PATH). A non-zero exit is a result, not an error;
  // errors are for a box that cannot answer (crashed, destroyed, protocol failure).
  StatusOr<ExecResult> Exec(const std::vector<std::string>& argv, const ExecOptions& options = {});
  // Starts argv as Exec would run it (the same environment, user, cwd, timeout, output limit
  // and box lifetime) and returns at once; stdin stays open for Process::WriteStdin until
  // CloseStdin. Output comes to options.on_stdout / on_stderr as it is written (and to the
  // result). With options.background the process outlives the handle (see Process) and has
  // no timeout unless options.timeout sets one.
  StatusOr<std::unique_ptr<Process>> Start(const std::vector<std::string>& argv,
                                           const ExecOptions& options = {});
  // Follows a process of this box by its pid (Process::pid, Processes): its output from what
  // its rings still hold on comes to options.on_stdout / on_stderr (and the result, unless
  // options.keep_output is false), then Wait() gives its exit. The handle detaches when it
  // goes: the process runs on. Several handles may follow one process. kNotFound when the
  // box has no such process in its table (only its own starts are; the last 32 that ended
  // are kept).
  StatusOr<std::unique_ptr<Process>> Attach(int pid, const ExecOptions& options = {});
  // The processes started in the box (Exec, Start, RunPython, ...), running ones and the last
  // that ended, oldest first.
  StatusOr<std::vector<ProcessInfo>> Processes();
  // Kills the process `pid` and everything it started (also what left its process group);
  // kNotFound when it does not run.
  Status KillProcess(int pid);
  // Sends `sig` to the process group of `pid`; kNotFound when it does not run.
  Status SignalProcess(int pid, int sig);
  // Writes `data` to the stdin of `pid` (one started with its stdin kept open: Box::Start),
  // then with `close` ends it. kNotFound when the box has no such process; to one that ended
  // meanwhile the data is dropped.
  Status SendStdin(int pid, std::string_view data, bool close = false);
  // `python3 -c code`, returning the whole result (through the waiting python3 of Prewarm
  // when there is one).
  StatusOr<ExecResult> RunPython(std::string_view code, const ExecOptions& options = {});
  // `python3 -c code`, returning stdout, as CodeBox.run does. A timeout is an error
  // (kDeadlineExceeded); a non-zero exit is not (its stderr is in RunPython's result).
  StatusOr<std::string> Run(std::string_view code);

  // Runs `code` as one cell of this box's code-interpreter session: a long-lived IPython
  // kernel, started on first use, in which variables persist from cell to cell (see
  // docs/kernel.md). An exception in the cell is a result (Execution::error), not an error;
  // errors are for a box or kernel that cannot run cells (no IPython in the image:
  // kFailedPrecondition; box crashed or destroyed). One cell at a time per box: concurrent
  // calls wait their turn. A cell past its timeout is interrupted (KeyboardInterrupt, state
  // kept); one that ignores the interrupt has its kernel killed after a grace (error
  // "KernelRestarted", state lost).
  StatusOr<Execution> RunCode(std::string_view code, const RunCodeOptions& options = {});
  // Ends the kernel of `session` ("": the box's own); the next RunCode starts a fresh one
  // (variables gone, files kept). A cell running now is ended (its result says
  // KernelRestarted).
  Status RestartKernel(std::string_view session = {});
  // Ends a named session (RunCodeOptions::session): its kernel and variables are gone, its
  // place is free; kNotFound when no such session lives.
  Status EndCodeSession(std::string_view session);
  // Interrupts the cell running now (KeyboardInterrupt, as its timeout would; the same grace
  // and kill follow if it ignores it); OK and nothing happens when no cell runs. For Ctrl-C
  // in a REPL and for cancelled Python tasks. Callable from any thread.
  Status InterruptCode(std::string_view session = {});

  // Starts now what the first RunPython / RunCode would otherwise start, and returns when it is
  // ready, so that call answers sooner (the server's warm pools do this for every pool box).
  // Nothing of it is shared between boxes: each waits in its own box. Calling it again while
  // they wait starts nothing more. A program run by the waiting python3 sees what a cold
  // `python3 -c` sees (sys.argv ['-c'], a clean __main__, the modules of a fresh start, its
  // env, cwd and stdin), its timeout counts from the hand-over, and its ExecResult matches;
  // what differs: its pid is older, ExecResult::duration is measured by the host, and stack
  // introspection past the program's module level (sys._getframe(1), traceback.print_stack,
  // warnings' stacklevel) sees the waiter's two frames, which also count against the recursion
  // limit. Errors: an image without python3 (kFailedPrecondition) or IPython (kernel), a
  // python3 that writes before it is ready (kStartFailed), a destroyed box (kInvalidArgument).
  Status Prewarm(const PrewarmOptions& options = {});

  // Copies a host file or directory (recursively) to box_path.
  Status CopyIn(const std::string& host_path, const std::string& box_path);
  // Copies a box file or directory (recursively) to host_path, making missing parent
  // directories. Only regular files and directories come out, owned by the caller, with
  // permission bits only (never setuid, setgid or sticky; the umask applies); symlinks, FIFOs,
  // sockets and devices are skipped (see CopyOutOptions::on_skipped). Nothing is ever written
  // through a host symlink below host_path. A copy that fails removes what it made (files it
  // replaced keep their new content); a file is never seen half-written. See docs/security.md.
  Status CopyOut(const std::string& box_path, const std::string& host_path,
                 const CopyOutOptions& options = {});

  // Files in memory, for programs with no host file to copy. Relative paths are under the
  // workdir. Parents are made. ReadFile fails with kLimitExceeded past max_bytes
  // (0: the box's disk size). Remove removes a file, or a directory with everything in it
  // (never following symlinks); kNotFound when absent.
  Status WriteFile(const std::string& box_path, std::string_view data, uint32_t mode = 0644);
  StatusOr<std::string> ReadFile(const std::string& box_path, uint64_t max_bytes = 0);
  StatusOr<std::vector<FileEntry>> ListDir(const std::string& box_path);
  Status Remove(const std::string& box_path);

  const BoxInfo& info() const;
  // Every connection the box opened through its egress proxy so far, oldest first (the last
  // 1000). Empty for a box without a network.
  std::vector<EgressRecord> EgressLog() const;
  // What the box has used so far. kUnavailable where the driver does not measure it (a box on
  // a server, a jail without a memory and cpu cgroup, a vm whose QEMU has ended).
  StatusOr<BoxUsage> Usage() const;
  // `pip install --user` of `packages` in the box, through its egress proxy. Needs a network
  // policy (BoxOptions::network or allow_hosts): a box without one fails with
  // kFailedPrecondition. A package pip cannot find or install is the ExecResult's non-zero
  // exit code and pip's stderr; a refused host is named in it.
  StatusOr<ExecResult> InstallPackages(const std::vector<std::string>& packages,
                                       const InstallOptions& options = {});
  // The box's network from now on, as BoxOptions::network and allow_hosts say it (a secret's
  // hosts stay allowed unless `network` is kNone without hosts). New connections are judged by
  // it at once; open ones to a host it no longer allows are ended (their programs see a
  // reset). Needs the box's proxy channel, which only a box created with a network policy has
  // (network allow with no hosts opens nothing yet): any other box fails with
  // kFailedPrecondition. info().network says the new policy; do not read info() on another
  // thread meanwhile.
  Status SetNetwork(NetworkMode network, const std::vector<std::string>& allow_hosts = {});
  // Ends the box now; later calls fail with a clear error. The destructor calls it.
  Status Destroy();

  class Impl;

 private:
  explicit Box(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace codebox

#endif  // CODEBOX_BOX_H_
