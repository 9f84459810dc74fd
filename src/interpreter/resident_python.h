// ResidentPython: one python3 kept running in a box, the core of both resident interpreters:
// the code-interpreter session (ipython_session.h, Box::RunCode) and the waiting python3 of a
// prewarmed box (warm_python.h, RunPython). Start runs `python3 -c SOURCE` with the given
// environment, cwd and user as an interactive exec on the box's agent (stdin open, no timeout
// in the agent: the owner enforces its own deadlines), routes its stdout and stderr to the
// owner's callbacks, owns the thread that waits for its exit and reports the exit to the
// owner. Kill ends its whole process tree, also what left its process group.
//
// The owner parses and bounds what the python3 says: the box is the attacker, and nothing here
// looks at its output.
//
// Thread safety: Start once, before anything else; then every method may be called from any
// thread. The callbacks run on the agent client's reader (output) and on the waiting thread
// (the exit), never with a lock of this class held.
#ifndef CODEBOX_INTERPRETER_RESIDENT_PYTHON_H_
#define CODEBOX_INTERPRETER_RESIDENT_PYTHON_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "agent_client/agent_client.h"
#include "codebox/status.h"

namespace codebox::interpreter {

// What to start and where its output and exit go.
struct ResidentSpec {
  protocol::AgentClient* agent = nullptr;  // outlives the ResidentPython
  const char* source = nullptr;            // run as `python3 -c SOURCE`
  std::map<std::string, std::string> env;  // its whole environment
  std::string cwd;
  std::optional<protocol::msg::User> user;  // who it runs as; nullopt: root
  uint64_t output_limit = 0;                // the agent's cap on each of its streams
  // The box's OOM kill count, read once before the start (oom_at_start()); may be empty.
  std::function<uint64_t()> oom_kill_count;
  // Its output, as the agent sends it (the agent client's reader thread). Called until the
  // exit was reported or the connection ended, both before the destructor returns.
  std::function<void(std::string_view)> on_stdout;
  std::function<void(std::string_view)> on_stderr;
  // Its exit (an error: the exec failed, e.g. the connection ended), once, on the waiting
  // thread; exited() is already true then.
  std::function<void(StatusOr<ExecResult>)> on_exit;
};

class ResidentPython {
 public:
  ResidentPython() = default;
  // Kills it unless its exit came, then joins the waiting thread: returns only once the exit
  // came or the connection ended (the box's end). An owner whose callbacks use its own members
  // declares the ResidentPython after them, so that it is destroyed first.
  ~ResidentPython();
  ResidentPython(const ResidentPython&) = delete;
  ResidentPython& operator=(const ResidentPython&) = delete;

  // Starts python3 and the thread waiting for its exit. The errors are the agent client's.
  Status Start(ResidentSpec spec);

  Status WriteStdin(std::string_view bytes);
  Status CloseStdin();
  Status Signal(int sig);
  // Kills its whole process tree unless its exit came (or it never started); its exit follows.
  void Kill();
  // Joins the waiting thread. Blocks until the exit was reported (or the connection ended):
  // call it once exited(), or without holding what on_exit takes.
  void Join();

  bool started() const { return exec_ != nullptr; }
  bool exited() const { return exited_.load(); }
  // The box's OOM kill count just before the start.
  uint64_t oom_at_start() const { return oom_at_start_; }

 private:
  std::unique_ptr<protocol::RunningExec> exec_;
  std::function<void(StatusOr<ExecResult>)> on_exit_;
  std::atomic<bool> exited_{false};
  uint64_t oom_at_start_ = 0;
  std::thread waiter_;  // in exec_->Wait() until the exit
};

// "2.5 s": a duration in the resident interpreters' error texts.
std::string SecondsText(std::chrono::milliseconds ms);

}  // namespace codebox::interpreter

#endif  // CODEBOX_INTERPRETER_RESIDENT_PYTHON_H_
