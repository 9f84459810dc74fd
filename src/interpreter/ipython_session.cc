#include "interpreter/ipython_session.h"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "base/log.h"
#include "base/text.h"
#include "interpreter/ipython_decoder.h"
#include "interpreter/resident_python.h"
#include "protocol/message.h"

namespace codebox::interpreter {

namespace {

using Clock = std::chrono::steady_clock;

// After its kill, a kernel's exit is awaited this long (the agent reports it at once; only a
// hostile or dead agent takes longer, and then the box reports the failure).
constexpr std::chrono::milliseconds kKillWait{10'000};
// The kernel's own stderr (its crash messages) kept for the reason a kernel died.
constexpr size_t kDiagnosticsTail = 4096;

std::string Restarted(const std::string& why) { return "kernel restarted: state lost: " + why; }

}  // namespace

struct KernelSession::Kernel {
  explicit Kernel(uint64_t output_limit) : decoder(output_limit) {}
  KernelDecoder decoder;
  bool exited = false;
  StatusOr<ExecResult> exit = Status::Ok();
  bool killed = false;  // by the host: not an OOM, whatever the counters say
  std::string broken;   // why the kernel's output broke the protocol
  std::string diagnostics;
  // Last: its callbacks use the fields above, and its destruction waits for the last of them.
  ResidentPython python;
};

KernelSession::KernelSession(KernelHost host) : host_(std::move(host)) {}

KernelSession::~KernelSession() {
  Close();
  std::unique_lock<std::mutex> lock(mu_);
  if (kernel_) EndKernel(lock, kernel_);
  std::vector<std::shared_ptr<Kernel>> retired = std::move(retired_);
  lock.unlock();
  for (auto& kernel : retired) {
    kernel->python.Join();
  }
}

void KernelSession::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  cv_.notify_all();
}

void KernelSession::OnOutput(Kernel* kernel, std::string_view bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Status st = kernel->decoder.Feed(bytes);
  if (!st.ok() && kernel->broken.empty()) kernel->broken = st.message();
  cv_.notify_all();
}

void KernelSession::OnDiagnostics(Kernel* kernel, std::string_view bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string& d = kernel->diagnostics;
  d.append(bytes.substr(bytes.size() - std::min(bytes.size(), kDiagnosticsTail)));
  if (d.size() > kDiagnosticsTail) d.erase(0, d.size() - kDiagnosticsTail);
}

StatusOr<std::shared_ptr<KernelSession::Kernel>> KernelSession::StartKernel(
    std::unique_lock<std::mutex>& lock) {
  auto kernel = std::make_shared<Kernel>(host_.output_limit);
  ResidentSpec spec;
  spec.agent = host_.agent;
  spec.source = kKernelSource;
  spec.env = host_.env;
  // The inline backend turns plt.show() and figures left open into image/png results;
  // IPython's own files go to /tmp, never to the workdir.
  spec.env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline";
  spec.env["IPYTHONDIR"] = "/tmp/.codebox-ipython";
  spec.env["PYTHONDONTWRITEBYTECODE"] = "1";
  spec.cwd = host_.cwd;
  spec.user = host_.user;
  spec.output_limit = std::numeric_limits<int64_t>::max();  // the decoder caps each cell
  // The callbacks run until the kernel's exit came or the connection ended, both before the
  // Kernel is freed: a plain pointer, so the Kernel does not own itself.
  Kernel* k = kernel.get();
  spec.on_stdout = [this, k](std::string_view b) { OnOutput(k, b); };
  spec.on_stderr = [this, k](std::string_view b) { OnDiagnostics(k, b); };
  spec.on_exit = [this, k](StatusOr<ExecResult> exit) {
    std::lock_guard<std::mutex> guard(mu_);
    k->exit = std::move(exit);
    k->exited = true;
    cv_.notify_all();
  };
  lock.unlock();  // the callbacks take mu_
  Status started = kernel->python.Start(std::move(spec));
  lock.lock();
  if (!started.ok()) return host_.explain(started, "start the code-interpreter kernel");
  kernel_ = kernel;

  Clock::time_point deadline = Clock::now() + kKernelStartTimeout;
  if (auto left = host_.time_left()) deadline = std::min(deadline, Clock::now() + *left);
  cv_.wait_until(lock, deadline, [&] {
    return kernel->decoder.ready() || kernel->decoder.fatal() || kernel->exited ||
           !kernel->broken.empty() || closed_;
  });
  if (kernel->decoder.ready()) return kernel;

  Status failure;
  if (const auto& fatal = kernel->decoder.fatal(); fatal && fatal->kind == "no_ipython") {
    failure = FailedPrecondition(
        "image '" + host_.image + "' has no IPython (" + base::TerminalSafe(fatal->message) +
        "); the code-interpreter session needs it: use the python or python-data image, or "
        "install python3-ipython");
  } else if (fatal) {
    failure = FailedPrecondition("the code-interpreter kernel did not start: " +
                                 base::TerminalSafe(fatal->message));
  } else if (kernel->exited && kernel->exit.ok() && kernel->exit->exit_code == 127) {
    failure = FailedPrecondition("image '" + host_.image +
                                 "' has no python3; the code-interpreter session needs it: use "
                                 "the python or python-data image");
  } else if (kernel->exited && !kernel->exit.ok()) {
    failure = kernel->exit.status();
  } else if (kernel->exited) {
    failure =
        StartFailed("the code-interpreter kernel exited during its start (exit code " +
                    std::to_string(kernel->exit->exit_code) + ", signal " +
                    std::to_string(kernel->exit->signal) + ")" +
                    (kernel->diagnostics.empty() ? std::string()
                                                 : ": " + base::TerminalSafe(kernel->diagnostics)));
  } else if (!kernel->broken.empty()) {
    failure = ProtocolError("the code-interpreter kernel sent malformed output during its start: " +
                            kernel->broken);
  } else if (closed_) {
    failure = InvalidArgument("the box has been destroyed; create a new box");
  } else {
    failure = DeadlineExceeded("the code-interpreter kernel did not say it was ready within " +
                               SecondsText(kKernelStartTimeout) + " (or the box's lifetime)");
  }
  EndKernel(lock, kernel);
  return host_.explain(failure, "");
}

void KernelSession::EndKernel(std::unique_lock<std::mutex>& lock, std::shared_ptr<Kernel> kernel) {
  if (kernel_ == kernel) kernel_.reset();
  if (!kernel->exited) {
    kernel->killed = true;
    lock.unlock();
    kernel->python.Kill();  // the whole process tree, also what escaped its process group
    lock.lock();
    cv_.wait_for(lock, kKillWait, [&] { return kernel->exited; });
  }
  if (!kernel->exited) {
    // Only a hostile or dead agent gets here: the waiter ends with the connection (the box's
    // end), and is joined then.
    CODEBOX_LOG(kWarn, "the code-interpreter kernel's exit did not come after its kill");
    retired_.push_back(kernel);
    return;
  }
  lock.unlock();
  kernel->python.Join();
  lock.lock();
}

void KernelSession::Deliver(std::unique_lock<std::mutex>& lock, Kernel& kernel,
                            const RunCodeOptions& options, Status* callback_error) {
  for (;;) {
    std::vector<Emit> emits = kernel.decoder.TakeEmits();
    if (emits.empty()) return;
    if (!callback_error->ok()) continue;  // a callback failed: the rest is only collected
    lock.unlock();
    try {
      for (const Emit& emit : emits) {
        if (emit.kind == Emit::kStdout && options.on_stdout) options.on_stdout(emit.text);
        if (emit.kind == Emit::kStderr && options.on_stderr) options.on_stderr(emit.text);
        if (emit.kind == Emit::kResult && options.on_result) options.on_result(emit.result);
      }
    } catch (const std::exception& e) {
      *callback_error = Internal(std::string("a RunCode callback threw: ") + e.what());
    } catch (...) {
      *callback_error = Internal("a RunCode callback threw an exception");
    }
    lock.lock();
  }
}

Status KernelSession::Died(Kernel& kernel, const std::string& why, uint64_t oom_before,
                           Execution* e) {
  // A kernel whose exec failed (the connection ended) is the box's failure, not the cell's.
  if (kernel.exited && !kernel.exit.ok()) return host_.explain(kernel.exit.status(), "run code");
  std::string reason = why;
  if (reason.empty() && kernel.exited) {
    const ExecResult& r = *kernel.exit;
    const bool oom =
        !kernel.killed &&
        (r.out_of_memory || (r.signal == SIGKILL && host_.oom_kill_count() > oom_before));
    if (oom) {
      e->out_of_memory = true;
      reason = "the kernel was killed for running out of memory (the box's memory limit is " +
               std::to_string(host_.memory_mib) +
               " MiB: BoxOptions::memory_mib, --memory); use less memory or a bigger box";
    } else if (r.signal != 0) {
      reason = "the kernel was killed by signal " + std::to_string(r.signal) + " (" +
               ::strsignal(r.signal) + ") during the cell";
    } else {
      reason = "the kernel exited with status " + std::to_string(r.exit_code) +
               " during the cell (os._exit, or a crash)";
    }
    if (!kernel.diagnostics.empty()) {
      reason += "; its last words: " + base::TerminalSafe(kernel.diagnostics, 1024);
    }
  }
  e->kernel_restarted = true;
  e->execution_count = 0;
  e->error = CellError{"KernelRestarted", Restarted(reason), ""};
  return Status::Ok();
}

StatusOr<Execution> KernelSession::AwaitCell(std::unique_lock<std::mutex>& lock,
                                             const std::shared_ptr<Kernel>& kernel,
                                             std::optional<std::chrono::milliseconds> timeout,
                                             const RunCodeOptions& options, uint64_t oom_before) {
  const Clock::time_point start = Clock::now();
  std::optional<Clock::time_point> deadline;
  if (timeout) deadline = start + *timeout;
  std::optional<Clock::time_point> grace_end;  // set once the interrupt went out
  bool timed_out = false;
  std::string kill_reason;
  Status callback_error;
  for (;;) {
    Deliver(lock, *kernel, options, &callback_error);
    if (kernel->decoder.cell_done() || kernel->exited || !kernel->broken.empty() || closed_) break;
    Clock::time_point now = Clock::now();
    if (restart_requested_) {
      kill_reason = "the kernel was restarted (RestartKernel) while the cell ran";
      break;
    }
    const bool timeout_passed = deadline && now >= *deadline;
    if (!grace_end && (interrupt_requested_ || timeout_passed)) {
      timed_out = timeout_passed;
      grace_end = now + kInterruptGrace;
      lock.unlock();
      // KeyboardInterrupt in the cell, as Jupyter's interrupt. A failure means the kernel is
      // already gone: its exit is on the way.
      (void)kernel->python.Signal(SIGINT);
      lock.lock();
      continue;
    }
    if (grace_end && now >= *grace_end) {
      kill_reason =
          timed_out ? "the cell ignored the interrupt at its timeout of " + SecondsText(*timeout) +
                          "; the kernel was killed after a grace of " + SecondsText(kInterruptGrace)
                    : "the cell ignored the interrupt (InterruptCode); the kernel was "
                      "killed after a grace of " +
                          SecondsText(kInterruptGrace);
      break;
    }
    std::optional<Clock::time_point> wake = grace_end ? grace_end : deadline;
    if (wake) {
      cv_.wait_until(lock, *wake);
    } else {
      cv_.wait(lock);
    }
  }
  Execution e = std::move(kernel->decoder.execution());
  e.duration = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  e.timed_out = timed_out;
  cell_running_ = false;
  if (closed_ && !kernel->decoder.cell_done()) {
    return host_.explain(InvalidArgument("the box was destroyed while the cell ran"), "run code");
  }
  if (!kernel->decoder.cell_done()) {
    if (!kernel->broken.empty()) kill_reason = "kernel sent malformed output: " + kernel->broken;
    EndKernel(lock, kernel);  // dead already, or killed now
    RETURN_IF_ERROR(Died(*kernel, kill_reason, oom_before, &e));
  }
  RETURN_IF_ERROR(callback_error);
  return e;
}

StatusOr<Execution> KernelSession::RunCode(std::string_view code, const RunCodeOptions& options) {
  std::lock_guard<std::mutex> cell(cell_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return InvalidArgument("the box has been destroyed; create a new box");
  restart_requested_ = false;
  std::shared_ptr<Kernel> kernel = kernel_;
  if (kernel && (kernel->exited || !kernel->broken.empty())) {
    // It died between cells (a background thread, a stray write to its protocol fd): say so
    // rather than run this cell in a fresh namespace unnoticed.
    Execution e;
    std::string why = kernel->broken.empty()
                          ? std::string()
                          : "kernel sent malformed output between cells: " + kernel->broken;
    EndKernel(lock, kernel);
    RETURN_IF_ERROR(Died(*kernel, why, host_.oom_kill_count(), &e));
    e.error->value += "; it died between cells, so this cell did not run: run it again";
    return e;
  }
  if (!kernel) {
    ASSIGN_OR_RETURN(kernel, StartKernel(lock));
  }

  std::optional<std::chrono::milliseconds> timeout =
      options.timeout.value_or(host_.default_timeout);
  if (*timeout == kNoTimeout) timeout.reset();
  if (auto left = host_.time_left()) timeout = timeout ? std::min(*timeout, *left) : *left;

  const int64_t id = next_cell_++;
  kernel->decoder.BeginCell(id);
  cell_running_ = true;
  interrupt_requested_ = false;
  protocol::Json request = {{"type", "execute"},
                            {"id", id},
                            {"code", std::string(code)},
                            {"max_line", kernel->decoder.max_line()}};
  const std::string line =
      request.dump(-1, ' ', /*ensure_ascii=*/true, protocol::Json::error_handler_t::replace) + "\n";
  const uint64_t oom_before = host_.oom_kill_count();
  lock.unlock();
  // A failed write means the kernel is gone: AwaitCell sees its exit.
  (void)kernel->python.WriteStdin(line);
  lock.lock();
  return AwaitCell(lock, kernel, timeout, options, oom_before);
}

Status KernelSession::Start() {
  std::lock_guard<std::mutex> cell(cell_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return InvalidArgument("the box has been destroyed; create a new box");
  if (kernel_) return Status::Ok();
  return StartKernel(lock).status();
}

Status KernelSession::Interrupt() {
  std::lock_guard<std::mutex> lock(mu_);
  if (cell_running_) interrupt_requested_ = true;
  cv_.notify_all();
  return Status::Ok();
}

Status KernelSession::Restart() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cell_running_) restart_requested_ = true;
    cv_.notify_all();
  }
  std::lock_guard<std::mutex> cell(cell_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  restart_requested_ = false;
  if (closed_) return InvalidArgument("the box has been destroyed; create a new box");
  if (kernel_) EndKernel(lock, kernel_);
  return Status::Ok();
}

}  // namespace codebox::interpreter
