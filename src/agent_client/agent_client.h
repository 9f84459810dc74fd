// AgentClient: the host side of the protocol. Speaks to one codebox-agent over a connected
// byte stream (socketpair or virtio-serial socket), whatever driver made it.
//
// Thread safety: every method may be called from many threads at once; requests are
// multiplexed on one connection (one reader thread demultiplexes by stream id).
// If the connection breaks (agent died, protocol error), every pending and later call fails
// with kBoxCrashed or kProtocolError and a message that says which.
//
// The agent is not trusted (box code may own it): every event is decoded by the typed codec
// (protocol/messages.h), every stream's life is tracked here (a frame on a stream the host
// never opened, a second terminal event, a frame that does not belong to the request end the
// connection with kProtocolError "agent protocol violation: ..."), every cap is enforced here
// whatever the agent claims, and every wait has a deadline (docs/protocol.md, "Host checks").
// No exception leaves the reader thread; a user callback that throws fails its own call.
#ifndef CODEBOX_AGENT_CLIENT_AGENT_CLIENT_H_
#define CODEBOX_AGENT_CLIENT_AGENT_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/unique_fd.h"
#include "codebox/options.h"
#include "codebox/status.h"
#include "protocol/messages.h"

namespace codebox::protocol {

struct ExecRequest {
  // What the agent is asked (docs/protocol.md, "exec"): argv, the whole environment, cwd, the
  // timeout (kNoTimeout: none), the output limit per stream (also enforced by the host), user,
  // terminal, ring size. exec.stdin_stream: stdin stays open for RunningExec::WriteStdin /
  // CloseStdin (after stdin_data, if any). exec.background is StartBackground's own: StartExec
  // refuses it.
  msg::Exec exec;
  // What stays on the host. nullopt: stdin is /dev/null (unless exec.stdin_stream).
  std::optional<std::string> stdin_data;
  // Called on the reader thread with at most exec.output_limit bytes in all per stream. One
  // that throws fails this exec (kInternal); the rest of its output is dropped.
  std::function<void(std::string_view)> on_stdout;
  std::function<void(std::string_view)> on_stderr;
  // false: output goes to the callbacks only and ExecResult's stdout_data / stderr_data stay
  // empty, so a long-lived process (the code-interpreter kernel) does not grow host memory.
  bool keep_output = true;
};

// What an attacher wants of a process of the agent's table (AgentClient::Attach).
struct AttachRequest {
  int32_t pid = 0;
  bool output = true;  // false: no output, only the exit (and the handle's stdin, signals)
  uint64_t output_limit = 16ull << 20;  // per stream, enforced here
  std::function<void(std::string_view)> on_stdout;
  std::function<void(std::string_view)> on_stderr;
  bool keep_output = true;
};

class RunningExec;
class EgressStream;
struct Pending;  // a request in flight (agent_connection.h)

// The longest a request waits without a frame on its stream (see docs/protocol.md).
inline constexpr std::chrono::milliseconds kDefaultIdleTimeout{60000};
// Defaults for the host-side caps of the calls that take them.
inline constexpr uint64_t kDefaultReadFileLimit = 256ull << 20;
inline constexpr size_t kDefaultListEntries = 1u << 20;
inline constexpr uint64_t kDefaultListBytes = 64ull << 20;

class AgentClient {
 public:
  // Takes a connected stream, exchanges hello frames; fails if the agent does not answer
  // within handshake_timeout (kStartFailed) or answers with a wrong version. `guest` (vm
  // boxes) goes in the host's hello, its time_unix_ns set as it is sent.
  static StatusOr<std::unique_ptr<AgentClient>> Connect(
      base::UniqueFd fd, std::chrono::milliseconds handshake_timeout,
      std::optional<msg::GuestSetup> guest = std::nullopt);
  ~AgentClient();  // closes the connection and joins the reader thread

  // Runs a process. ExecResult::driver is left empty (the Box fills it).
  StatusOr<ExecResult> Exec(const ExecRequest& request);
  // Starts a process and returns at once; talk to it and wait for it through the handle,
  // which must not outlive this client. Exec is StartExec + Wait.
  StatusOr<std::unique_ptr<RunningExec>> StartExec(const ExecRequest& request);
  // Starts a process that belongs to no request (docs/protocol.md, "Processes"): its output
  // goes to the agent's rings only; returns its pid once the agent started it. Its timeout is
  // the request's; stdin stays open when exec.stdin_stream (write it by Attach).
  StatusOr<int32_t> StartBackground(const ExecRequest& request);
  // Follows a process of the agent's table: the handle gets what its rings hold, then its
  // output as it comes, then its exit (Wait). Destroying the handle, or Detach(), leaves the
  // process running. Kill() kills its whole tree.
  StatusOr<std::unique_ptr<RunningExec>> Attach(const AttachRequest& request);
  // The agent's table: running processes and the last ones that ended (host-checked bounds:
  // msg::kMaxListed*).
  StatusOr<std::vector<msg::ProcessEntry>> ListProcesses();
  // Signals a process of the table by pid (its process group); with `tree` (SIGKILL only)
  // kills every process it started. kNotFound when no such process runs.
  Status SignalProcess(int32_t pid, int sig, bool tree = false);
  // Files written, and the directories made for them, belong to `owner` (set before the
  // client is shared between threads): the box's user, whose they are in a vm too.
  void set_file_owner(std::optional<msg::User> owner) { file_owner_ = owner; }
  Status WriteFile(const std::string& box_path, std::string_view data, uint32_t mode = 0644);
  // Streams a host file into the box without loading it whole.
  Status WriteFileFromHost(const std::string& host_path, const std::string& box_path);
  // A box file in memory; kLimitExceeded when it is larger than max_bytes.
  StatusOr<std::string> ReadFile(const std::string& box_path,
                                 uint64_t max_bytes = kDefaultReadFileLimit);
  // Streams a box file: on_header(size, mode) once (size as the agent claims it), then
  // on_chunk for each piece of data, on the reader thread. Fails with kLimitExceeded (before
  // any data when the claimed size is over, or as soon as the bytes received pass it) when the
  // file is larger than max_bytes. If a callback returns an error the call ends with it and
  // the rest of the stream is dropped. Idle deadline: see set_idle_timeout.
  Status ReadFileStream(const std::string& box_path, uint64_t max_bytes,
                        const std::function<Status(uint64_t size, uint32_t mode)>& on_header,
                        const std::function<Status(std::string_view chunk)>& on_chunk);
  // The listing, assembled from the agent's pages; kLimitExceeded past max_entries entries or
  // max_bytes (names plus 64 bytes per entry).
  StatusOr<std::vector<DirEntry>> ListDir(const std::string& box_path,
                                          size_t max_entries = kDefaultListEntries,
                                          uint64_t max_bytes = kDefaultListBytes);
  // mkdir -p; with `owner` the directory (made now or already there) then belongs to it.
  Status MakeDir(const std::string& box_path, uint32_t mode = 0755,
                 std::optional<msg::User> owner = std::nullopt);
  // Removes a box file, or a directory with everything in it (the agent never follows a
  // symlink); kNotFound when absent.
  Status Remove(const std::string& box_path);
  // Asks the agent to end every process and exit; waits for its answer up to `wait`.
  Status Shutdown(std::chrono::milliseconds wait = std::chrono::milliseconds(1000));

  // Opens one egress_accept stream (docs/protocol.md): the handle reports the next connection
  // a program in the box makes to 127.0.0.1:3128 there, and carries its bytes. The handle
  // must not outlive this client.
  StatusOr<std::unique_ptr<EgressStream>> AcceptEgress();

  // OK while the connection is up; else why it ended.
  Status connection_status() const;

  // The idle deadline of every request (default kDefaultIdleTimeout): no frame on a request's
  // stream for this long ends it with kDeadlineExceeded (an exec first asks the agent whether
  // it still runs). Meant for tests and the fuzzer.
  void set_idle_timeout(std::chrono::milliseconds idle);

  class Impl;

 private:
  explicit AgentClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::optional<msg::User> file_owner_;
};

// An exec in flight (AgentClient::StartExec). Methods may be called from any thread, also
// while another thread is in Wait(). Destroying it before Wait() returned cancels the exec in
// the agent (its processes are killed).
class RunningExec {
 public:
  ~RunningExec();
  RunningExec(const RunningExec&) = delete;
  RunningExec& operator=(const RunningExec&) = delete;

  // Stdin frames (ExecRequest::interactive_stdin); data is cut into frames here.
  Status WriteStdin(std::string_view data);
  Status CloseStdin();
  // Signals the exec's process group (the agent's kill op); kNotFound once it has ended.
  Status Signal(int sig);
  // The new size of a tty exec's terminal (each side 1..msg::kMaxTerminalSide); its
  // foreground programs get SIGWINCH. kNotFound once it has ended; kInvalidArgument for an
  // exec without a tty (for an attached handle, as the agent says).
  Status Resize(msg::TerminalSize size);
  // Has the agent kill the exec's whole process tree, also what left its process group (the
  // cancel op, or for an attached handle signal_process with tree); returns at once. Its
  // exit still comes to Wait().
  void Kill();
  // An attached handle (AgentClient::Attach) stops following the process, which runs on:
  // Wait() then fails with kFailedPrecondition ("detached"). A no-op for an exec's own handle.
  void Detach();
  // The process's pid in the box once the agent said it (0 before; an agent that predates
  // `started` never says it).
  int32_t pid() const;
  // Waits for the exit (the request's timeout plus a grace; while the exec is silent the agent
  // is asked every idle period whether it still runs, so an idle process is never ended by
  // the idle deadline). Call once.
  StatusOr<ExecResult> Wait();
  uint32_t stream() const { return stream_; }

  struct State;

 private:
  friend class AgentClient;
  RunningExec(AgentClient::Impl* client, uint32_t stream, std::string what,
              std::chrono::milliseconds timeout, std::shared_ptr<State> state,
              std::shared_ptr<Pending> pending);
  // Frames and destruction of an attached handle detach rather than kill.
  bool attached() const;
  AgentClient::Impl* client_;
  const uint32_t stream_;
  const std::string what_;
  const std::chrono::milliseconds timeout_;
  // Not inside State: the stream's handler owns State, so State owning the stream's Pending
  // would make a cycle that is never freed.
  std::shared_ptr<State> state_;
  std::shared_ptr<Pending> pending_;
  bool waited_ = false;
};

// One egress connection from the host's side (AgentClient::AcceptEgress). Made for one
// thread that polls wake_fd() (the box's bridge), but every method is thread-safe. The host
// checks the agent's side of the flow control: data past the window or an ack for bytes never
// sent ends the agent connection with kProtocolError. Destroying the handle before the stream
// ended cancels it (the agent closes the socket).
class EgressStream {
 public:
  ~EgressStream();
  EgressStream(const EgressStream&) = delete;
  EgressStream& operator=(const EgressStream&) = delete;

  // An eventfd, readable whenever Take() may return something new (the reader thread signals
  // it); Take() drains it.
  int wake_fd() const;

  struct State {
    bool connected = false;    // the program in the box opened the connection
    std::string data;          // the box's bytes since the last Take (at most the window)
    bool box_eof = false;      // the box ended its sending (after `data`)
    uint64_t send_credit = 0;  // bytes Send may send now
    bool ended = false;        // the stream is over (done, error, connection lost): see status
    Status status;             // why it ended; OK for done
  };
  State Take();

  // The host passed `bytes` of the box's data on (1..kEgressWindow per call).
  Status Ack(uint64_t bytes);
  // At most State::send_credit bytes; cut into data frames here.
  Status Send(std::string_view data);
  Status SendEof();
  // Cancels the stream in the agent (the program's connection is reset); idempotent.
  void Close();

  struct Shared;

 private:
  friend class AgentClient;
  EgressStream(AgentClient::Impl* client, uint32_t stream, std::shared_ptr<Shared> shared);
  AgentClient::Impl* client_;
  const uint32_t stream_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace codebox::protocol

#endif  // CODEBOX_AGENT_CLIENT_AGENT_CLIENT_H_
