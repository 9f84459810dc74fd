// The typed codec for every control message of docs/protocol.md: both hellos, every request
// (host -> agent) and every event (agent -> host). The agent and the host both encode and
// decode through these functions, so the two sides cannot drift apart.
//
// Decoding trusts nothing: it uses only checked getters (type and range per field), names the
// field in its error, rejects unknown fields (but in hellos, which stay open so that versions
// can be told apart), and never throws. Every decode error is a kProtocolError.
#ifndef CODEBOX_PROTOCOL_MESSAGES_H_
#define CODEBOX_PROTOCOL_MESSAGES_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "codebox/status.h"
#include "codebox/timeout.h"
#include "protocol/message.h"

namespace codebox::protocol {

// One list_dir entry.
struct DirEntry {
  std::string name;
  std::string type;  // "file", "dir", "symlink", "other"
  uint64_t size = 0;
  uint32_t mode = 0;  // permission bits, 0..07777
};

namespace msg {

// Ranges the decoders enforce; out-of-range values from a peer are protocol errors.
inline constexpr int64_t kMaxExitCode = 255;
inline constexpr int64_t kMinExitCode = -1;
inline constexpr int64_t kMaxSignal = 64;
inline constexpr int64_t kMaxMode = 07777;
// The largest user or group id a request may name: 2^32 - 1 is (uid_t)-1, which the kernel's
// set*id calls take as "leave this id unchanged", so a process asked to run as it would keep
// running as root.
inline constexpr int64_t kMaxId = 0xfffffffe;
// The box's egress port (127.0.0.1 in the box) and the most bytes of data either side may send
// on an egress stream before the other acknowledges them (docs/protocol.md, "egress_accept").
inline constexpr uint16_t kEgressPort = 3128;
inline constexpr uint64_t kEgressWindow = 1u << 20;
// A terminal's rows and columns are each 1..kMaxTerminalSide (TIOCSWINSZ takes 16 bits; no
// screen is larger, and 0 would mean "unknown" to programs).
inline constexpr int64_t kMaxTerminalSide = 10000;
// Each stream of a process keeps its last output in a ring of this many bytes (exec's
// `ring_bytes`), so that an attacher can replay it (docs/protocol.md, "Processes").
inline constexpr uint64_t kDefaultRingBytes = 1u << 20;
inline constexpr uint64_t kMaxRingBytes = 64u << 20;
// What a `processes` event may hold: the agent lists at most kMaxListedProcesses (the newest),
// and of each argv at most kMaxListedArgs arguments of at most kMaxListedArgBytes bytes; the
// host refuses more (one event stays well under a frame).
inline constexpr size_t kMaxListedProcesses = 256;
inline constexpr size_t kMaxListedArgs = 8;
inline constexpr size_t kMaxListedArgBytes = 128;

// What the host of a vm box tells its agent in the hello, applied before any exec runs
// (docs/protocol.md, "Handshake"). A vm box restored from a template is a copy of one booted
// machine: without this every clone would have the template's RNG state and frozen clock.
inline constexpr size_t kGuestEntropyBytes = 64;
struct GuestSetup {
  std::string entropy;        // kGuestEntropyBytes fresh host random bytes (hex on the wire)
  int64_t time_unix_ns = 0;   // the host's CLOCK_REALTIME when it sent the hello
  bool resend_hello = false;  // a clone: its first hello went to the host that made the template
  int64_t max_processes = 0;  // pids limit for the execs' cgroup; 0 = none
  int64_t memory_bytes = 0;   // memory limit for the execs' cgroup; 0 = none
  bool operator==(const GuestSetup&) const = default;
};

// Both directions: the host sends `client` (and `guest` to a vm box's agent), the agent
// `agent` and `pid`.
struct Hello {
  int64_t protocol = 0;
  std::string client;
  std::string agent;
  std::optional<int64_t> pid;
  std::optional<GuestSetup> guest;
};

// Who a process runs as, or who owns a directory: ids in the box, 0..kMaxId each.
struct User {
  uint32_t uid = 0;
  uint32_t gid = 0;
  bool operator==(const User&) const = default;
};

// The size of an exec's pseudo-terminal, each side 1..kMaxTerminalSide.
struct TerminalSize {
  uint16_t rows = 24;
  uint16_t cols = 80;
  bool operator==(const TerminalSize&) const = default;
};

// Requests.
struct Exec {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::string cwd = "/";
  bool stdin_stream = false;  // "stdin": "stream" | "none"
  // The agent kills the process tree past it. On the wire "timeout_ms", where 0 (or absent)
  // is kNoTimeout.
  std::chrono::milliseconds timeout = kNoTimeout;
  uint64_t output_limit = 16ull << 20;
  // nullopt: the agent's own ids (root in the box). Else the process drops every supplementary
  // group and runs as uid:gid, or the exec fails with an error (it never runs as root instead).
  std::optional<User> user = std::nullopt;
  // nullopt: pipes. Else the process runs on a pseudo-terminal of this size made in the box:
  // all its output comes as stdout frames, and closing stdin writes the terminal's VEOF.
  std::optional<TerminalSize> tty = std::nullopt;
  // The process outlives this stream: the agent answers `started` at once and keeps the
  // output in the rings only (`attach` to see it); the stream's cancel does not concern it.
  bool background = false;
  uint64_t ring_bytes = kDefaultRingBytes;  // per stream, 0..kMaxRingBytes
};
// Streams a process of the table to this stream: what its rings hold, then its output as it
// comes, then its `exit` (at once for one that ended). With output false, nothing but the exit.
// Stdin frames, kill and resize on this stream go to the process; cancel detaches (`done`),
// the process runs on. Several streams may attach to one process.
struct Attach {
  int32_t pid = 0;
  bool output = true;
};
// Asks for the table: answered by one `processes` event.
struct ListProcesses {};
// Signals a process of the table by its pid: its process group, or with `tree` every process
// it started (as cancel kills an exec's). Answered by done, or not_found once it ended.
struct SignalProcess {
  int32_t pid = 0;
  int32_t signal = 9;
  bool tree = false;
};
struct WriteFile {
  std::string path;
  uint32_t mode = 0644;
  bool parents = false;
  // The file, and each directory `parents` makes for it, is made to belong to uid:gid.
  std::optional<User> owner = std::nullopt;
};
struct ReadFile {
  std::string path;
};
struct ListDir {
  std::string path;
};
struct MakeDir {
  std::string path;
  uint32_t mode = 0755;
  bool parents = false;
  // The directory at `path` (made now or already there) is made to belong to uid:gid.
  std::optional<User> owner = std::nullopt;
};
// signal 0 only asks whether the exec still runs (done: yes; not_found: no).
struct Kill {
  uint32_t target = 0;
  int32_t signal = 9;
};
struct Shutdown {};
// The host gave up on stream `target` (a cap, a deadline, an error of its own): the agent stops
// a download, discards an upload, kills an exec's processes, and answers done.
struct Cancel {
  uint32_t target = 0;
};
// Removes a file, or a directory with everything in it, never following a symlink.
struct Remove {
  std::string path;
};
// The box's way out: the agent listens on 127.0.0.1:kEgressPort (from the first of these on)
// and ties the next connection a program makes there to this stream.
struct EgressAccept {};
// Sent on an open egress stream, not a new one: the host passed `bytes` (1..kEgressWindow) of
// the box's data on, so the agent may send that many more.
struct EgressAck {
  uint64_t bytes = 0;
};
// The terminal of the tty exec on stream `target` now has this size (its foreground programs
// get SIGWINCH). Answered by done, or not_found when no such exec runs.
struct Resize {
  uint32_t target = 0;
  TerminalSize size;
};
// From the host that makes a vm template, once its warm-up execs ended: the agent answers done
// and then waits for a new hello (the next host's, a clone's; GuestSetup::resend_hello).
struct AwaitHello {};
using Request =
    std::variant<Exec, WriteFile, ReadFile, ListDir, MakeDir, Kill, Shutdown, Cancel, Remove,
                 EgressAccept, EgressAck, Resize, AwaitHello, Attach, ListProcesses, SignalProcess>;

// Events.
struct Exit {
  int32_t exit_code = 0;  // -1..255; -1 when a signal ended the process
  int32_t signal = 0;     // 0..64
  bool timed_out = false;
  bool output_truncated = false;
  int64_t duration_ms = 0;  // >= 0
  bool out_of_memory = false;
  // On an attach stream: the bytes of each stream that had fallen out of the ring before
  // this attacher could see them.
  uint64_t dropped_stdout = 0;
  uint64_t dropped_stderr = 0;
  bool operator==(const Exit&) const = default;
};
// A process of the table was started: the first event of every exec stream (the last of a
// background one).
struct Started {
  int32_t pid = 0;
};
// One process of the table (`processes`).
struct ProcessEntry {
  int32_t pid = 0;
  std::vector<std::string> argv;  // at most kMaxListedArgs, each at most kMaxListedArgBytes
  bool tty = false;
  bool background = false;
  int64_t started_unix_ms = 0;
  bool running = true;
  std::optional<Exit> exit;                         // once it ended
  uint64_t stdout_bytes = 0, stderr_bytes = 0;      // written by the process in all
  uint64_t dropped_stdout = 0, dropped_stderr = 0;  // no longer in the rings
  bool operator==(const ProcessEntry&) const = default;
};
struct Processes {
  std::vector<ProcessEntry> processes;  // at most kMaxListedProcesses, oldest first
};
struct Done {};
struct File {
  uint64_t size = 0;
  uint32_t mode = 0;
};
// A page of a listing; `more` is true on every page but the last.
struct Entries {
  std::vector<DirEntry> entries;
  bool more = false;
};
struct Error {
  std::string code;  // not_found, invalid_argument, permission_denied, io_error, protocol_error
  std::string message;
};
// An egress stream's connection was made by a program in the box.
struct Connected {};
// On an egress stream: the agent passed `bytes` (1..kEgressWindow) of the host's data on.
struct Ack {
  uint64_t bytes = 0;
};
using Event = std::variant<Exit, Done, File, Entries, Error, Connected, Ack, Started, Processes>;

std::string_view RequestName(const Request& request);  // "exec", "write_file", ...
std::string_view EventName(const Event& event);        // "exit", "done", ...

std::string EncodeHello(const Hello& hello);
StatusOr<Hello> DecodeHello(const Json& message);

std::string EncodeRequest(const Request& request);
StatusOr<Request> DecodeRequest(const Json& message);
StatusOr<Request> DecodeRequestPayload(std::string_view payload);

std::string EncodeEvent(const Event& event);
StatusOr<Event> DecodeEvent(const Json& message);
StatusOr<Event> DecodeEventPayload(std::string_view payload);

// A listing cut into `entries` payloads of at most max_page_bytes each (every entry fits: a
// name is at most NAME_MAX bytes); `more` is set on all but the last. An empty listing is one
// empty page.
std::vector<std::string> EncodeEntriesPages(const std::vector<DirEntry>& entries,
                                            size_t max_page_bytes);

// The Status an error event stands for; the message is made terminal-safe and bounded.
Status StatusFromError(const Error& error);

}  // namespace msg
}  // namespace codebox::protocol

#endif  // CODEBOX_PROTOCOL_MESSAGES_H_
