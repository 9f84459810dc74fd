// The one declarative description of a box and of one exec in it. Validated once, by
// BoxOptions::Validate() (Box::Create calls it); every driver reads only its own fields.
// Each field is described (type, unit, bounds, help, aliases) in the option schema
// (codebox/option_schema.h), which also sets options by name for the CLI, Python and JSON.
#ifndef CODEBOX_OPTIONS_H_
#define CODEBOX_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/egress.h"
#include "codebox/status.h"
#include "codebox/timeout.h"  // kNoTimeout, an explicit "no limit" for the timeouts below

namespace codebox {

enum class DriverKind {
  kAuto,  // the strongest driver that runs at full speed on this host
  kJail,  // namespaces + seccomp + cgroups; shared kernel
  kVm,    // a microVM with its own kernel (QEMU microvm)
};
std::string_view DriverKindName(DriverKind kind);
StatusOr<DriverKind> ParseDriverKind(std::string_view name);

// A box's way out (docs/security.md, "Network"). Every connection goes through the host's
// egress proxy, which judges the host name, resolves it on the host and refuses internal
// addresses; the box itself has no route to anything.
enum class NetworkMode {
  kNone,   // no network at all (the default)
  kAllow,  // the hosts of BoxOptions::allow_hosts only
  kOpen,   // any public address; only when asked for by name
};

// A value the box must use but never see (docs/security.md, "Secrets"): the box holds only its
// placeholder, "<CODEBOX_SECRET:NAME>", also the value of the environment variable NAME in
// every exec, and the host's egress proxy puts the value in its place in the request line and
// headers of requests to `hosts` (HTTPS there is intercepted with the box's own CA), and
// nowhere else. Written, never read back: no answer, log line or error holds a value.
struct Secret {
  std::string name;                     // letters, digits, '_', not first a digit; at most 64
  std::string value;                    // 1..4096 bytes, no NUL, CR or LF
  std::vector<std::string> hosts = {};  // allowlist entries (BoxOptions::allow_hosts' syntax)
  bool operator==(const Secret&) const = default;
};
inline constexpr size_t kMaxSecrets = 32;
inline constexpr std::string_view kSecretPlaceholderPrefix = "<CODEBOX_SECRET:";
inline std::string SecretPlaceholder(std::string_view name) {
  return std::string(kSecretPlaceholderPrefix) + std::string(name) + ">";
}

// Sizes the kernel and the protocol allow for what an exec carries; checked before anything
// is sent, so an oversized request is a clear error instead of a dead box.
inline constexpr size_t kMaxArgBytes = 128u << 10;          // one argv string (MAX_ARG_STRLEN)
inline constexpr size_t kMaxEnvironmentBytes = 256u << 10;  // all of "K=V\0" together

// Every field has a default initializer, so designated initializers may name any subset
// (Box::Create({.image = "python", .memory_mib = 256})) under -Wextra.
struct BoxOptions {
  // Image name from images/ (built with `codebox image build NAME`).
  std::string image = "python";
  DriverKind driver = DriverKind::kAuto;
  // vm driver: allow QEMU's software emulation (tcg) where the host lacks hardware
  // virtualization. Slow (seconds to boot), but a real VM.
  bool allow_emulation = false;
  // vm driver: boot the kernel instead of restoring the box from a saved template machine
  // (the first box of an image, memory, cpus and disk makes the template; the rest are clones).
  bool no_snapshot = false;
  // vm driver: when a restore fails, fail instead of booting (BoxInfo::warnings says why a box
  // was booted).
  bool no_fallback = false;
  double cpus = 1.0;
  uint64_t memory_mib = 512;
  uint64_t disk_mib = 256;  // writable scratch layer (tmpfs) size
  uint32_t max_processes = 128;
  uint32_t max_open_files = 1024;
  // Default wall-clock limit of each exec (at least 1 ms, or kNoTimeout); ExecOptions::timeout
  // overrides it.
  std::chrono::milliseconds exec_timeout{30'000};
  // Wall-clock limit of the whole box (at least 1 ms, or kNoTimeout): past it every exec fails
  // and the box ends.
  std::chrono::milliseconds box_timeout = kNoTimeout;
  // Environment of every exec (PATH, HOME, LANG are set unless given). Nothing of the host's
  // environment enters the box.
  std::map<std::string, std::string> env = {};
  std::string workdir = "/work";
  // Who the box's processes run as. Empty: the image's user (root for a recipe image);
  // "root"; or a name or UID[:GID] from the image's /etc/passwd, such as "user" (every recipe
  // image holds it: uid 1000, home /home/user, as E2B's templates). The workdir is that
  // user's. A jail runs as a user only with root on the host; without, the box runs as root
  // and BoxInfo::user says why.
  std::string user = {};
  // Bytes of stdout and of stderr kept per exec; the rest is dropped and flagged.
  uint64_t output_limit_bytes = 16ull << 20;
  // The box's way out. allow_hosts given with kNone means kAllow. With kAllow or kOpen, a proxy
  // at 127.0.0.1:3128 in the box (HTTP_PROXY, HTTPS_PROXY and their lower-case forms point at
  // it) is the only way out.
  NetworkMode network = NetworkMode::kNone;
  // Host patterns: "pypi.org", "*.example.org" (names below it), "10.0.0.5" or "[fd00::1]"
  // (an internal address is reached only when named as a literal), each with an optional
  // ":port"; without one, ports 80 and 443.
  std::vector<std::string> allow_hosts = {};
  // Values the box uses by placeholder only; their hosts join the allowlist (network allow
  // is implied).
  std::vector<Secret> secrets = {};
  // Bytes all the box's connections may move, both ways together; past it they are cut.
  uint64_t network_max_bytes = 1ull << 30;
  // Bytes per second one connection may move, both ways together; 0: no limit.
  uint64_t network_rate_bytes = 0;
  // jail driver: keep one started, never-used spare jail with these options, so the next
  // Box::Create with the same options takes it instead of waiting for a start (~10 ms).
  // The spare is an idle box (about 1 MiB of host memory) for as long as this process runs.
  bool prestart = false;
  // Where images and kernels live; empty = $CODEBOX_HOME, else /var/lib/codebox for root,
  // else ~/.local/share/codebox.
  std::string home = {};
  // Run the box on a codebox server (`codebox serve`) instead of in this process:
  // "unix:/run/codebox/codebox.sock" or "http://127.0.0.1:8080". Empty: in this process.
  // The box's other options go to the server, which checks them again.
  std::string server = {};
  // The bearer token for `server`; empty: none (a unix socket's mode guards it).
  std::string server_token = {};

  // Checks every field against the option schema; the error names the field.
  Status Validate() const;
};

// The mode a box gets: allow_hosts or secrets with kNone is kAllow.
inline NetworkMode EffectiveNetwork(const BoxOptions& options) {
  if (options.network == NetworkMode::kNone &&
      (!options.allow_hosts.empty() || !options.secrets.empty())) {
    return NetworkMode::kAllow;
  }
  return options.network;
}

// Every name non-empty without '=' or NUL, every value without NUL, each "K=V" within
// kMaxArgBytes and all of them within kMaxEnvironmentBytes; used for BoxOptions::env and
// ExecOptions::env alike.
Status ValidateEnvironment(const std::map<std::string, std::string>& env);

// A timeout is at least 1 ms, or kNoTimeout; `what` names it in the error.
Status ValidateTimeout(std::chrono::milliseconds timeout, std::string_view what);

// Every argument non-NUL and within kMaxArgBytes. (Box::Exec sends a longer `python3 -c`
// program as a file before it checks.)
Status ValidateArgv(const std::vector<std::string>& argv);

// The size of a pseudo-terminal (ExecOptions::tty, Process::Resize): each side 1..10000.
struct TerminalSize {
  uint16_t rows = 24;
  uint16_t cols = 80;
  bool operator==(const TerminalSize&) const = default;
};

class ExecCancel;  // codebox/process.h

struct ExecOptions {
  std::map<std::string, std::string> env = {};  // added to BoxOptions::env
  std::string cwd = {};                         // empty = BoxOptions::workdir
  // Who this exec runs as: empty: the box's user (BoxOptions::user); "root" (or "0"); or the
  // box's user by name or uid. No other (a jail maps only those two ids).
  std::string user = {};
  // Exec: empty = stdin is /dev/null. Box::Start: written first; stdin then stays open.
  std::optional<std::string> stdin_data = {};
  // nullopt: BoxOptions::exec_timeout; else at least 1 ms, or kNoTimeout.
  std::optional<std::chrono::milliseconds> timeout = {};
  // Streaming: called from an internal thread as chunks arrive (the result still holds the
  // captured output). Must not call back into the same Box.
  std::function<void(std::string_view)> on_stdout = {};
  std::function<void(std::string_view)> on_stderr = {};
  // false: the result's stdout_data and stderr_data stay empty, the output going to the
  // callbacks only (a caller that sends each chunk on need not also hold all of it; the output
  // limit and output_truncated hold as ever).
  bool keep_output = true;
  // nullopt: pipes. Else the program runs on a pseudo-terminal of this size made in the box
  // (its stdin, stdout, stderr and controlling terminal; TERM comes from `env`): everything
  // it writes comes to stdout (on_stdout, stdout_data) in the order written, with the
  // terminal's "\r\n" line ends; stderr stays empty. Not on a box on a server yet
  // (kFailedPrecondition).
  std::optional<TerminalSize> tty = {};
  // Box::Start only: the process belongs to the box, not to the handle: it runs until it
  // exits, is killed or the box ends, and `timeout` is none unless set. Box::Attach follows
  // it again from anywhere.
  bool background = false;
  // How much of each output stream the box keeps for Box::Attach (at most 64 MiB; a server
  // may allow less).
  uint64_t ring_bytes = 1u << 20;
  // Exec and RunPython: lets another thread kill this call's processes (ExecCancel).
  std::shared_ptr<ExecCancel> cancel = {};
};

struct ExecResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;      // the signal that ended it, 0 if it exited
  std::string stdout_data;
  std::string stderr_data;
  bool timed_out = false;
  bool out_of_memory = false;
  bool output_truncated = false;
  std::chrono::milliseconds duration{0};
  std::string driver;  // which isolation ran it: "jail", "vm/kvm", "vm/tcg"
  // Box::Attach: bytes of each stream that had fallen out of the box's ring before this
  // handle could see them.
  uint64_t dropped_stdout = 0;
  uint64_t dropped_stderr = 0;
  // The box's connections refused, failed or cut while it ran (Box::Exec, RunPython,
  // InstallPackages): why, and what to do.
  std::vector<NetworkEvent> network_events = {};

  bool ok() const { return exit_code == 0 && !timed_out && !out_of_memory; }
};

}  // namespace codebox

#endif  // CODEBOX_OPTIONS_H_
