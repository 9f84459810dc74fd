#include "interpreter/warm_python.h"

#include <signal.h>

#include <algorithm>
#include <condition_variable>
#include <limits>

#include "base/deadline.h"
#include "base/text.h"
#include "codebox/process.h"
#include "interpreter/resident_python.h"

namespace codebox::interpreter {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::string_view_literals;

// What warm_python.py writes on stdout before the program runs (keep the two in step).
constexpr std::string_view kReadyMarker = "\0codebox-warm:ready\0"sv;
constexpr std::string_view kAckMarker = "\0codebox-warm:ack\0"sv;
// Unexpected output of a waiter kept for the error that reports it.
constexpr size_t kDiagnosticsBytes = 1024;

bool ReadAtStartup(const std::string& name) {
  static constexpr std::string_view kExact[] = {"PATH", "HOME",     "TZ",
                                                "LANG", "LANGUAGE", "GLIBC_TUNABLES"};
  static constexpr std::string_view kPrefixes[] = {"PYTHON", "LC_", "LD_", "MALLOC_"};
  for (std::string_view e : kExact) {
    if (name == e) return true;
  }
  for (std::string_view p : kPrefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  return false;
}

}  // namespace

bool SameStartupEnvironment(const std::map<std::string, std::string>& a,
                            const std::map<std::string, std::string>& b) {
  auto covered = [](const auto& x, const auto& y) {
    for (const auto& [name, value] : x) {
      if (!ReadAtStartup(name)) continue;
      auto it = y.find(name);
      if (it == y.end() || it->second != value) return false;
    }
    return true;
  };
  return covered(a, b) && covered(b, a);
}

// One waiting python3: the resident python3 (its exec and the thread waiting for its exit) and
// what its output said. Destroying it kills what still runs and joins that thread: only once
// the exit came or the connection ended.
class WarmPython::Waiter {
 public:
  explicit Waiter(uint64_t output_limit) : limit_(output_limit) {}

  Status Start(const WarmHost& host) {
    ResidentSpec spec;
    spec.agent = host.agent;
    spec.source = kWarmPythonSource;
    spec.env = host.env;
    spec.cwd = host.workdir;
    spec.user = host.user;
    // Its output is kept here, without the markers, capped at the program's limit.
    const uint64_t markers = kReadyMarker.size() + kAckMarker.size();
    spec.output_limit = host.output_limit > std::numeric_limits<uint64_t>::max() - markers
                            ? host.output_limit
                            : host.output_limit + markers;
    spec.oom_kill_count = host.oom_kill_count;
    // Called until the exit came or the connection ended, both before the Waiter's destruction
    // returns: a plain pointer, so the Waiter does not own itself.
    spec.on_stdout = [this](std::string_view b) { OnOutput(true, b); };
    spec.on_stderr = [this](std::string_view b) { OnOutput(false, b); };
    spec.on_exit = [this](StatusOr<ExecResult> exit) {
      std::lock_guard<std::mutex> lock(mu_);
      exit_ = std::move(exit);
      exited_ = true;
      cv_.notify_all();
    };
    return python_.Start(std::move(spec));
  }

  Status AwaitReady(Clock::time_point deadline, const std::string& image) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_until(lock, deadline, [&] {
      return phase_ != Phase::kStarting || exited_ || !broken_.empty() || killed_;
    });
    if (phase_ != Phase::kStarting && broken_.empty()) return Status::Ok();
    if (!broken_.empty()) {
      return StartFailed("prewarm: the waiting python3 " + broken_ +
                         "; RunPython starts python3 for each program instead");
    }
    if (exited_ && !exit_.ok()) return exit_.status().WithContext("prewarm: python3");
    if (exited_ && exit_->exit_code == 127) {
      return FailedPrecondition("prewarm: image '" + image +
                                "' has no python3 (or the workdir is gone); use the python or "
                                "python-data image");
    }
    if (exited_) {
      return StartFailed("prewarm: the waiting python3 ended during its start-up (exit code " +
                         std::to_string(exit_->exit_code) + ", signal " +
                         std::to_string(exit_->signal) + ")");
    }
    if (killed_) return InvalidArgument("prewarm: the box has been destroyed; create a new box");
    return DeadlineExceeded("prewarm: the waiting python3 did not say it was ready within " +
                            SecondsText(kWarmStartTimeout) + " (or the box's lifetime)");
  }

  // Ready, and nothing has happened to it since.
  bool Waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return phase_ == Phase::kReady && !exited_ && broken_.empty() && !killed_;
  }
  // Starting or waiting.
  bool Alive() {
    std::lock_guard<std::mutex> lock(mu_);
    return (phase_ == Phase::kStarting || phase_ == Phase::kReady) && !exited_ && broken_.empty() &&
           !killed_;
  }
  bool Exited() {
    std::lock_guard<std::mutex> lock(mu_);
    return exited_;
  }
  uint64_t oom_at_start() const { return python_.oom_at_start(); }

  void Kill() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (exited_ || killed_ || !python_.started()) return;
      killed_ = true;
      cv_.notify_all();
    }
    python_.Kill();  // the whole process tree, also what left its process group
  }

  std::optional<StatusOr<ExecResult>> Run(std::string_view code, const ExecOptions& options,
                                          const protocol::msg::Exec& exec, const WarmHost& host);

 private:
  enum class Phase { kStarting, kReady, kHanded, kRunning };

  void OnOutput(bool out, std::string_view bytes);
  // Strips the marker due in this phase (mu_ held); what is left over is output.
  std::string_view ConsumeMarker(std::string_view bytes);
  void Broke(const std::string& why, std::string_view bytes) {
    if (broken_.empty()) {
      broken_ =
          why + ": \"" + base::TerminalSafe(std::string(bytes.substr(0, kDiagnosticsBytes))) + "\"";
    }
    cv_.notify_all();
  }

  const uint64_t limit_;
  std::mutex mu_;  // guards everything below but python_
  std::condition_variable cv_;
  Phase phase_ = Phase::kStarting;
  size_t matched_ = 0;  // bytes of the due marker seen
  std::string broken_;  // why its output cannot be trusted
  bool killed_ = false;
  bool exited_ = false;
  StatusOr<ExecResult> exit_ = Status::Ok();
  const ExecOptions* run_ = nullptr;  // the callbacks of the program running now
  int in_callback_ = 0;
  std::string out_, err_;
  uint64_t out_bytes_ = 0, err_bytes_ = 0;  // counted against the limit, kept or not
  bool truncated_ = false;
  // Last: its callbacks use the members above, and its destruction waits for the last of them.
  ResidentPython python_;
};

std::string_view WarmPython::Waiter::ConsumeMarker(std::string_view bytes) {
  while (!bytes.empty() && (phase_ == Phase::kStarting || phase_ == Phase::kHanded)) {
    std::string_view marker = phase_ == Phase::kStarting ? kReadyMarker : kAckMarker;
    if (bytes[0] != marker[matched_]) {
      Broke(phase_ == Phase::kStarting ? "wrote to stdout during its start-up"
                                       : "wrote to stdout before it took the program",
            bytes);
      return {};
    }
    bytes.remove_prefix(1);
    if (++matched_ == marker.size()) {
      matched_ = 0;
      phase_ = phase_ == Phase::kStarting ? Phase::kReady : Phase::kRunning;
      cv_.notify_all();
    }
  }
  return bytes;
}

void WarmPython::Waiter::OnOutput(bool out, std::string_view bytes) {
  const std::function<void(std::string_view)>* callback = nullptr;
  std::string_view piece;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.empty()) return;  // it is being killed; nothing of it is used
    if (out) bytes = ConsumeMarker(bytes);
    if (bytes.empty() || !broken_.empty()) return;
    if (phase_ != Phase::kRunning) {
      Broke(std::string("wrote to ") + (out ? "stdout" : "stderr") + " before it ran a program",
            bytes);
      return;
    }
    // The program's output, capped here as the agent caps a cold exec's.
    uint64_t& sent = out ? out_bytes_ : err_bytes_;
    size_t room = static_cast<size_t>(limit_ - std::min<uint64_t>(sent, limit_));
    size_t keep = std::min(room, bytes.size());
    if (keep < bytes.size()) truncated_ = true;
    if (keep == 0) return;
    piece = bytes.substr(0, keep);
    sent += keep;
    if (run_ == nullptr || run_->keep_output) (out ? out_ : err_).append(piece);
    if (run_ != nullptr) callback = out ? &run_->on_stdout : &run_->on_stderr;
    if (callback == nullptr || !*callback) return;
    ++in_callback_;
  }
  // Without the lock: the caller's code. One that throws fails the exec, as for a cold one.
  struct Leave {
    Waiter* w;
    ~Leave() {
      std::lock_guard<std::mutex> lock(w->mu_);
      --w->in_callback_;
      w->cv_.notify_all();
    }
  } leave{this};
  (*callback)(piece);
}

std::optional<StatusOr<ExecResult>> WarmPython::Waiter::Run(std::string_view code,
                                                            const ExecOptions& options,
                                                            const protocol::msg::Exec& exec,
                                                            const WarmHost& host) {
  std::string header = std::to_string(code.size());
  header.append(1, '\0').append(options.stdin_data ? "1" : "0");
  header.append(1, '\0').append(exec.cwd);
  for (const auto& [name, value] : exec.env)
    header.append(1, '\0').append(name).append(1, '\0').append(value);
  std::string payload = std::to_string(header.size()) + "\n" + header;
  payload.append(code);

  const uint64_t oom_before = host.oom_kill_count();
  {
    std::lock_guard<std::mutex> lock(mu_);
    phase_ = Phase::kHanded;
    run_ = &options;
  }
  const Clock::time_point start = Clock::now();
  // Cancelled, the waiter dies with the program (and a cancel before it took it makes the
  // cold run that follows die as it starts).
  if (options.cancel) options.cancel->Bind([this] { Kill(); });
  // A failed send means the connection is gone: the exit (an error) says so below.
  Status sent = python_.WriteStdin(payload);
  if (sent.ok() && options.stdin_data) sent = python_.WriteStdin(*options.stdin_data);
  if (sent.ok()) (void)python_.CloseStdin();

  std::unique_lock<std::mutex> lock(mu_);
  const std::optional<Clock::time_point> deadline = base::DeadlineAfter(start, exec.timeout);
  std::optional<Clock::time_point> give_up;  // set by our kill
  bool timed_out = false;
  while (!exited_) {
    const Clock::time_point now = Clock::now();
    const bool untrusted = !broken_.empty() && phase_ != Phase::kRunning;
    if (!give_up && (untrusted || (deadline && now >= *deadline))) {
      timed_out = !untrusted;
      give_up = now + kWarmKillWait;
      lock.unlock();
      Kill();
      lock.lock();
      continue;
    }
    if (give_up && now >= *give_up) break;
    std::optional<Clock::time_point> wake = give_up ? give_up : deadline;
    if (wake) {
      cv_.wait_until(lock, *wake);
    } else {
      cv_.wait(lock);
    }
  }
  // The callbacks are the caller's: none runs once this returns.
  run_ = nullptr;
  if (options.cancel) {
    lock.unlock();  // a running kill takes mu_
    options.cancel->Unbind();
    lock.lock();
  }
  cv_.wait(lock, [&] { return in_callback_ == 0; });
  if (!exited_) {
    return StatusOr<ExecResult>(DeadlineExceeded(
        "exec python3: the agent did not report the program's end within " +
        SecondsText(kWarmKillWait) + " of its kill" +
        (timed_out ? " at its timeout of " + SecondsText(exec.timeout) : std::string())));
  }
  // Gone before it took the program (killed, OOM, or untrusted): the program never ran here.
  if (phase_ != Phase::kRunning) return std::nullopt;
  if (!exit_.ok()) return StatusOr<ExecResult>(exit_.status());
  ExecResult r;
  r.exit_code = exit_->exit_code;
  r.signal = exit_->signal;
  r.stdout_data = std::move(out_);
  r.stderr_data = std::move(err_);
  r.timed_out = timed_out;
  r.output_truncated = truncated_ || exit_->output_truncated;
  // The agent counted OOM kills from the waiter's start, the host from the hand-over; a kill
  // of ours is never one.
  r.out_of_memory = !killed_ && r.signal == SIGKILL &&
                    (exit_->out_of_memory || host.oom_kill_count() > oom_before);
  r.duration = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  return StatusOr<ExecResult>(std::move(r));
}

WarmPython::WarmPython(WarmHost host) : host_(std::move(host)) {}

WarmPython::~WarmPython() {
  std::lock_guard<std::mutex> lock(mu_);
  waiting_.reset();
  retired_.clear();
}

Status WarmPython::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return InvalidArgument("prewarm: the box has been destroyed; create a new box");
  if (waiting_ && waiting_->Alive()) return Status::Ok();
  if (waiting_) Retire(std::move(waiting_));
  auto w = std::make_shared<Waiter>(host_.output_limit);
  RETURN_IF_ERROR(w->Start(host_).WithContext("prewarm: start python3"));
  waiting_ = std::move(w);
  return Status::Ok();
}

Status WarmPython::AwaitReady() {
  std::shared_ptr<Waiter> w;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return InvalidArgument("prewarm: the box has been destroyed; create a new box");
    w = waiting_;
  }
  if (!w) return FailedPrecondition("prewarm: no python3 was started (call Start first)");
  Clock::time_point deadline = Clock::now() + kWarmStartTimeout;
  if (auto left = host_.time_left()) deadline = std::min(deadline, Clock::now() + *left);
  Status st = w->AwaitReady(deadline, host_.image);
  if (st.ok()) return st;
  std::lock_guard<std::mutex> lock(mu_);
  if (waiting_ == w) waiting_.reset();
  Retire(std::move(w));
  return st;
}

std::optional<StatusOr<ExecResult>> WarmPython::Run(const protocol::msg::Exec& exec,
                                                    const ExecOptions& options) {
  if (exec.argv.size() != 3 || exec.argv[0] != "python3" || exec.argv[1] != "-c") {
    return std::nullopt;
  }
  const std::string& code = exec.argv[2];
  std::shared_ptr<Waiter> w;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || !waiting_) return std::nullopt;
    // Dead, untrusted, or counting OOM kills from before one that happened since its start.
    if (!waiting_->Waiting() || host_.oom_kill_count() != waiting_->oom_at_start()) {
      Retire(std::move(waiting_));
      return std::nullopt;
    }
    // Options it cannot honour: it stays for a later call.
    if (code.size() > kMaxWarmProgramBytes || !SameStartupEnvironment(exec.env, host_.env)) {
      return std::nullopt;
    }
    w = std::move(waiting_);
  }
  std::optional<StatusOr<ExecResult>> result = w->Run(code, options, exec, host_);
  std::lock_guard<std::mutex> lock(mu_);
  Retire(std::move(w));
  return result;
}

void WarmPython::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  if (waiting_) waiting_->Kill();
}

void WarmPython::Retire(std::shared_ptr<Waiter> w) {
  std::erase_if(retired_, [](const std::shared_ptr<Waiter>& r) { return r->Exited(); });
  w->Kill();
  if (!w->Exited()) retired_.push_back(std::move(w));
  // Else its last reference goes here: its thread has returned from Wait(); the join is quick.
}

}  // namespace codebox::interpreter
