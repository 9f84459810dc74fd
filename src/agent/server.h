// The agent's side of the protocol: one connection, served by a single-threaded poll loop so
// no slow exec or transfer ever blocks the others. Output to the host goes through one
// bounded buffer: past kHighWater the loop stops reading exec pipes and files until the
// host drains it (backpressure), so memory stays bounded whatever the programs print.
#ifndef CODEBOX_AGENT_SERVER_H_
#define CODEBOX_AGENT_SERVER_H_

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/exec.h"
#include "agent/files.h"
#include "agent/output_ring.h"
#include "base/unique_fd.h"
#include "codebox/status.h"
#include "protocol/frame.h"
#include "protocol/message.h"
#include "protocol/messages.h"

namespace codebox::agent {

class Server {
 public:
  using Clock = std::chrono::steady_clock;

  // `conn` is the connected protocol stream. `is_init`: the agent is PID 1 (of a VM or of a
  // jail's pid namespace), so SIGTERM/SIGINT are forwarded to the execs instead of ending it.
  Server(base::UniqueFd conn, bool is_init);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The port of the box's egress proxy on 127.0.0.1 (default kEgressPort): tests on the host
  // pick another one, or 0 for an ephemeral one. `on_listen` is told the port once the agent
  // listens (at the first egress_accept). Call before Run().
  void set_egress_port(uint16_t port, std::function<void(uint16_t)> on_listen = {});
  // What to do with the `guest` of the host's hello (a vm box's agent: vm_guest.h,
  // ApplyGuestSetup), before any request is read; an error ends the connection with it. Without
  // a handler a `guest` is ignored. Call before Run().
  void set_guest_setup_handler(std::function<Status(const protocol::msg::GuestSetup&)> handler) {
    guest_setup_ = std::move(handler);
  }
  // The port asked for, or the bound one once listening.
  uint16_t egress_port() const { return egress_port_; }

  // Serves until the host hangs up, asks for shutdown, or breaks the protocol; every process
  // the agent started is killed before it returns. The result is the agent's exit status:
  // 0 after EOF or shutdown, 2 after a protocol error, 1 after an I/O error.
  int Run();

 private:
  // A stream that follows a process of the table (attach): from its cursors in the rings on.
  struct Attacher {
    uint32_t stream = 0;
    bool output = true;  // false: only the exit
    uint64_t out_cursor = 0, err_cursor = 0;
    uint64_t dropped_out = 0, dropped_err = 0;  // fell out of the ring before it was sent
  };
  // One process of the table: running, or ended and kept for listing and attaching.
  struct Exec {
    pid_t pid = -1;
    // With a tty, `in` and `out` are the terminal's master side and `err` is never open.
    base::UniqueFd in, out, err;
    bool tty = false;
    bool background = false;
    std::vector<std::string> listed_argv;  // cut to what a `processes` event may hold
    int64_t started_unix_ms = 0;
    // The exec stream that waits for the exit (foreground); its output goes there directly,
    // under output_limit, and past the connection's high water the pipes wait.
    std::optional<uint32_t> stream;
    std::vector<Attacher> attachers;
    OutputRing out_ring, err_ring;
    std::string stdin_pending;
    bool stdin_close_requested = false;
    uint64_t output_limit = 0;
    uint64_t sent_out = 0, sent_err = 0;
    bool truncated = false;
    Clock::time_point start;
    std::optional<Clock::time_point> deadline;
    bool timed_out = false;
    bool killed_by_agent = false;
    uint64_t oom_kills_before = 0;
    bool exited = false;
    int wait_status = 0;
    Clock::time_point exited_at;
    std::optional<protocol::msg::User> user;
    base::UniqueFd switch_report;  // with a user: SpawnedExec::switch_report
    std::optional<protocol::msg::Exit> exit;  // once it ended and its pipes were drained
    bool running() const { return !exit.has_value(); }
  };
  struct Upload {
    std::optional<FileWriter> writer;
    Status error;  // first failure; the remaining data frames are then dropped
  };
  // One egress_accept stream (server_egress.cc): waiting for a connection, then carrying it.
  struct Egress {
    base::UniqueFd sock;    // invalid while the stream waits for a connection
    uint64_t unacked = 0;   // bytes sent to the host that it has not acknowledged
    std::string to_socket;  // the host's bytes; those from to_socket_off on are unwritten
    size_t to_socket_off = 0;
    uint64_t written_unacked = 0;  // written to the socket, not yet acknowledged to the host
    bool host_eof = false;         // the host ended its sending
    bool shut_wr = false;          // the socket's writing side is shut (after host_eof)
    bool box_eof = false;          // the program ended its sending (empty data frame sent)
    size_t unwritten() const { return to_socket.size() - to_socket_off; }
  };
  // What one pollfd of the loop stands for.
  struct PollSlot {
    uint32_t stream;  // the stream, or for 2, 3 and 4 the process's pid
    // 0 connection, 1 signalfd, 2 stdout, 3 stderr, 4 stdin, 5 egress listener, 6 egress socket
    int which;
  };

  // Connection.
  void Send(protocol::FrameType type, uint32_t stream, std::string_view payload);
  void SendEvent(uint32_t stream, const protocol::msg::Event& event);
  void SendError(uint32_t stream, const Status& status);
  bool Flush();  // non-blocking; false when the connection broke
  void FlushBlocking(std::chrono::milliseconds budget);
  void ReadConnection();
  void Fatal(int exit_code, const Status& why);
  bool OutputBackedUp() const { return out_.size() - out_sent_ >= kHighWater; }

  // Requests.
  void HandleFrame(protocol::Frame frame);
  void HandleControl(uint32_t stream, const protocol::Json& request);
  void HandleHello(const protocol::Frame& frame);
  void HandleData(uint32_t stream, std::string_view payload);
  void StartExec(uint32_t stream, const protocol::msg::Exec& request);
  void StartWrite(uint32_t stream, const protocol::msg::WriteFile& request);
  void StartRead(uint32_t stream, const protocol::msg::ReadFile& request);
  void SendListing(uint32_t stream, const std::string& path);
  void HandleKill(uint32_t stream, const protocol::msg::Kill& request);
  void HandleResize(uint32_t stream, const protocol::msg::Resize& request);
  void HandleShutdown(uint32_t stream);
  void HandleCancel(uint32_t stream, const protocol::msg::Cancel& request);

  // The egress port (server_egress.cc).
  void StartEgress(uint32_t stream);
  void HandleEgressAck(uint32_t stream, const protocol::Json& request);
  bool HandleEgressData(uint32_t stream, std::string_view payload);  // false: not an egress
  bool CancelEgress(uint32_t target);                                // false: not an egress
  void AddEgressPolls(std::vector<pollfd>& fds, std::vector<PollSlot>& slots) const;
  void AcceptEgress();
  void PumpEgress(uint32_t stream, short revents);
  // Ends the stream with `why` (an error event; the program sees a reset), or, when why is
  // OK, with done.
  void EndEgress(uint32_t stream, const Status& why);
  void ForgetEgress(uint32_t stream);  // erases it; its late frames are dropped from now on
  void CloseAllEgress();

  // Execs (server_exec.cc).
  void HandleStdin(uint32_t stream, std::string_view payload);
  void PumpStdin(Exec& exec);
  // One read (at most kDataChunk bytes) from one of the exec's outputs: the loop takes one
  // from each ready output in turn, so that output written to stdout and stderr alternately
  // keeps its order as far as two pipes can tell it.
  void DrainPipe(Exec& exec, base::UniqueFd& fd, protocol::FrameType type);
  void ReapChildren();
  void HandleSignals();
  void KillExecTree(Exec& exec);
  // An argument as a `processes` event lists it (protocol::msg::kMaxListedArgBytes).
  static std::string ListedArg(std::string_view arg);
  // The process a stream stands for (its exec stream or an attach stream), or null.
  Exec* ExecOfStream(uint32_t stream);
  bool AnyRunning() const;

  // The process table (server_processes.cc).
  void HandleAttach(uint32_t stream, const protocol::msg::Attach& request);
  void SendProcessList(uint32_t stream);
  void HandleSignalProcess(uint32_t stream, const protocol::msg::SignalProcess& request);
  // Detaches `stream` from its process; false when it is no attach stream.
  bool Detach(uint32_t stream);
  // Sends each attacher what its cursors have not reached, while the connection has room,
  // and the exit to those that caught up with a process that ended.
  void PumpAttachers();
  // Forgets the oldest ended processes past kKeptEnded (those nobody is attached to).
  void TrimTable();
  // Forgets the ended process `pid` (its pid is a new process's now), ending its attachers.
  void ForgetEnded(pid_t pid);
  void KillEverything();
  void CheckDeadlines(Clock::time_point now);
  void SendHello();
  void HandleAwaitHello(uint32_t stream);
  void FinishExecs(Clock::time_point now);
  void PumpDownloads();
  int PollTimeoutMs(Clock::time_point now) const;

  // Reads more of a pipe into read_buf_ (which holds `have` bytes) until a line ends, the buffer
  // is full or kLineWait passes; *ended when the pipe reached its end. An unbuffered Python
  // writes print()'s text and its newline in two calls: they go out as one chunk.
  ssize_t CompleteLine(int fd, size_t have, bool* ended);

  static constexpr size_t kHighWater = 4u << 20;
  // Ended processes the table keeps (for `processes` and late attachers), newest first.
  static constexpr size_t kKeptEnded = 32;
  static constexpr auto kLineWait = std::chrono::milliseconds(10);
  static constexpr auto kDrainGrace = std::chrono::milliseconds(100);

  base::UniqueFd conn_;
  base::UniqueFd signal_fd_;
  bool is_init_;
  protocol::FrameDecoder decoder_;
  bool hello_received_ = false;
  std::string out_;
  size_t out_sent_ = 0;
  std::string read_buf_;
  std::map<pid_t, Exec> execs_;        // the process table
  std::map<uint32_t, pid_t> streams_;  // exec and attach streams -> their process
  std::map<uint32_t, Upload> uploads_;
  std::map<uint32_t, base::UniqueFd> downloads_;
  std::map<uint32_t, Egress> egress_;
  std::deque<uint32_t> egress_waiting_;  // streams without a connection, oldest first
  base::UniqueFd egress_listener_;
  uint16_t egress_port_ = protocol::msg::kEgressPort;
  std::function<void(uint16_t)> on_egress_listen_;
  std::function<Status(const protocol::msg::GuestSetup&)> guest_setup_;
  // Egress streams that ended: the host's acks and data still in flight for them are dropped.
  std::deque<uint32_t> egress_ended_order_;
  std::set<uint32_t> egress_ended_;
  std::optional<uint32_t> shutdown_stream_;
  Clock::time_point shutdown_deadline_;
  bool quit_ = false;
  int exit_code_ = 0;
};

}  // namespace codebox::agent

#endif  // CODEBOX_AGENT_SERVER_H_
