// KernelSession: the host side of a box's code-interpreter session (Box::RunCode). Starts the
// IPython kernel (ipython_kernel.py, embedded in the library) as a ResidentPython (an
// interactive exec on the box's agent, resident_python.h), sends it one cell at a time and
// collects what the kernel reports, through the checking KernelDecoder. Timeouts interrupt the
// cell (SIGINT), a kernel that ignores the interrupt is killed after a grace, and a kernel that
// dies or breaks the protocol is reported as the cell's KernelRestarted error. See docs/kernel.md.
//
// Thread safety: RunCode calls are serialised (one cell at a time, the others wait);
// InterruptCode may be called from any thread.
#ifndef CODEBOX_INTERPRETER_IPYTHON_SESSION_H_
#define CODEBOX_INTERPRETER_IPYTHON_SESSION_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent_client/agent_client.h"
#include "codebox/execution.h"
#include "codebox/status.h"

namespace codebox::interpreter {

// The kernel's source (src/interpreter/ipython_kernel.py), embedded at build time.
extern const char kKernelSource[];

// A cell that ignores its interrupt is killed after this long.
inline constexpr std::chrono::milliseconds kInterruptGrace{2000};
// A kernel has this long to say it is ready (IPython's import under tcg is slow).
inline constexpr std::chrono::milliseconds kKernelStartTimeout{120'000};

// What the session needs from its box.
struct KernelHost {
  protocol::AgentClient* agent = nullptr;  // outlives the session
  std::map<std::string, std::string> env;  // the exec environment (the kernel adds its own)
  std::string cwd;
  std::optional<protocol::msg::User> user;  // who the kernel runs as; nullopt: root
  std::string image;                        // named in the "no IPython" error
  uint64_t output_limit = 16ull << 20;
  uint64_t memory_mib = 0;
  std::chrono::milliseconds default_timeout{30'000};
  // The box's OOM kill count (the cgroup's word in a jail).
  std::function<uint64_t()> oom_kill_count;
  // The most a wait may last from now (the box's remaining lifetime), or nullopt.
  std::function<std::optional<std::chrono::milliseconds>()> time_left;
  // Adds what the box knows to an error (crashed, destroyed, expired).
  std::function<Status(Status, const std::string&)> explain;
};

class KernelSession {
 public:
  explicit KernelSession(KernelHost host);
  ~KernelSession();  // ends the kernel
  KernelSession(const KernelSession&) = delete;
  KernelSession& operator=(const KernelSession&) = delete;

  StatusOr<Execution> RunCode(std::string_view code, const RunCodeOptions& options);
  // Starts the kernel now unless there is one (Box::Prewarm), so the first cell does not wait
  // for it. A kernel that died is left for the next RunCode to report.
  Status Start();
  Status Restart();
  Status Interrupt();
  // Ends the kernel and refuses later cells (the box is going away).
  void Close();

  struct Kernel;

 private:
  StatusOr<std::shared_ptr<Kernel>> StartKernel(std::unique_lock<std::mutex>& lock);
  // Kills the kernel (its whole process tree) and waits a bounded time for its exit.
  void EndKernel(std::unique_lock<std::mutex>& lock, std::shared_ptr<Kernel> kernel);
  void OnOutput(Kernel* kernel, std::string_view bytes);
  void OnDiagnostics(Kernel* kernel, std::string_view bytes);
  // Waits for the running cell's end under its deadline, interrupt and kill.
  StatusOr<Execution> AwaitCell(std::unique_lock<std::mutex>& lock,
                                const std::shared_ptr<Kernel>& kernel,
                                std::optional<std::chrono::milliseconds> timeout,
                                const RunCodeOptions& options, uint64_t oom_before);
  // Hands decoded output to the cell's callbacks (without the lock held).
  void Deliver(std::unique_lock<std::mutex>& lock, Kernel& kernel, const RunCodeOptions& options,
               Status* callback_error);
  // The cell's report for a kernel that is gone: state lost, and why.
  Status Died(Kernel& kernel, const std::string& why, uint64_t oom_before, Execution* e);

  const KernelHost host_;
  std::mutex cell_mu_;  // held for a whole cell: one at a time
  std::mutex mu_;       // guards everything below and every Kernel's fields
  std::condition_variable cv_;
  std::shared_ptr<Kernel> kernel_;
  std::vector<std::shared_ptr<Kernel>> retired_;  // killed, exit not seen: joined at the end
  bool closed_ = false;
  bool cell_running_ = false;
  bool interrupt_requested_ = false;
  bool restart_requested_ = false;
  int64_t next_cell_ = 1;
};

}  // namespace codebox::interpreter

#endif  // CODEBOX_INTERPRETER_IPYTHON_SESSION_H_
