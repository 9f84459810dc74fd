// WarmPython: a box's waiting python3 (Box::Prewarm, used by RunPython). Prewarm starts
// `python3 -c <warm_python.py>` as a ResidentPython (resident_python.h: an interactive exec);
// it finishes its start-up, says it is ready, and waits on stdin. The next RunPython hands it
// the program (with its environment, directory and stdin) instead of starting python3, so the
// result comes without the interpreter's start-up. It is used once.
//
// The result must be the one a cold `python3 -c` gives, and the box is the attacker, so:
//   * the waiter has no timeout in the agent: the host kills it at the exec's deadline,
//     counted from the hand-over, and reports timed_out;
//   * its output goes through callbacks whose target the RunPython call fills in; the host
//     caps it at the box's output limit and strips the waiter's two markers (ready; program
//     taken), which must come first and exactly: anything else means the waiter cannot be
//     trusted, and it is killed;
//   * a waiter that is gone before it took the program (killed by an earlier exec, OOM) makes
//     Run return nullopt, and RunPython runs the program cold; so do options the waiter cannot
//     honour (variables python3 reads at start-up, such as PATH or PYTHON*, that differ);
//   * every wait has a deadline; a waiter whose exit never comes after its kill is kept until
//     the box's end (the connection's end ends its thread), then joined.
//
// Thread safety: every method may be called from any thread; one Run takes the waiter.
#ifndef CODEBOX_INTERPRETER_WARM_PYTHON_H_
#define CODEBOX_INTERPRETER_WARM_PYTHON_H_

#include <chrono>
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
#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::interpreter {

// The waiter's source (src/interpreter/warm_python.py), embedded at build time.
extern const char kWarmPythonSource[];

// A waiter must say it is ready within this long (python3's start-up under tcg is slow).
inline constexpr std::chrono::milliseconds kWarmStartTimeout{60'000};
// After the host kills a waiter, its exit is awaited this long (the agent reports it at once).
inline constexpr std::chrono::milliseconds kWarmKillWait{10'000};
// Programs larger than this are run cold (as a file, like Exec does).
inline constexpr size_t kMaxWarmProgramBytes = 16u << 20;

// What the waiter needs from its box.
struct WarmHost {
  protocol::AgentClient* agent = nullptr;   // outlives the WarmPython
  std::map<std::string, std::string> env;   // the box's environment: the waiter starts with it
  std::string workdir;                      // where the waiter starts: the box's default cwd
  std::optional<protocol::msg::User> user;  // who it runs as (the box's); nullopt: root
  std::string image;                        // named in errors
  uint64_t output_limit = 16ull << 20;
  // The box's OOM kill count (the cgroup's word in a jail).
  std::function<uint64_t()> oom_kill_count;
  // The most a wait may last from now (the box's remaining lifetime), or nullopt.
  std::function<std::optional<std::chrono::milliseconds>()> time_left;
};

// Whether `a` and `b` agree on every variable python3 reads at start-up (PATH, HOME, TZ, the
// locale, PYTHON*, the loader's and the allocator's): a waiter started with one cannot run a
// program as a python3 started with the other would.
bool SameStartupEnvironment(const std::map<std::string, std::string>& a,
                            const std::map<std::string, std::string>& b);

class WarmPython {
 public:
  explicit WarmPython(WarmHost host);
  // Kills what still runs and joins its thread: only once its exit came or the connection
  // ended (the box's end).
  ~WarmPython();
  WarmPython(const WarmPython&) = delete;
  WarmPython& operator=(const WarmPython&) = delete;

  // Starts a waiter unless one is starting or waiting; returns at once.
  Status Start();
  // Waits until the waiter is ready (OK), or says why it cannot be (it is then discarded).
  Status AwaitReady();
  // Hands `exec`, a `python3 -c CODE` resolved by the box as Exec would send it (the whole
  // environment, cwd, timeout), to the waiter and returns its result (errors are the box's
  // failures, unexplained). Its stdin is options.stdin_data. nullopt: no waiter could take it
  // (none, gone, or an exec it cannot honour): run it cold.
  std::optional<StatusOr<ExecResult>> Run(const protocol::msg::Exec& exec,
                                          const ExecOptions& options);
  // Kills the waiter and refuses new ones (the box is going away).
  void Close();

  class Waiter;

 private:
  // Kills `w` unless its exit came; keeps it until then (mu_ held).
  void Retire(std::shared_ptr<Waiter> w);

  const WarmHost host_;
  std::mutex mu_;
  std::shared_ptr<Waiter> waiting_;
  std::vector<std::shared_ptr<Waiter>> retired_;  // killed, exit not seen yet
  bool closed_ = false;
};

}  // namespace codebox::interpreter

#endif  // CODEBOX_INTERPRETER_WARM_PYTHON_H_
