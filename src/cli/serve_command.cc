// `codebox serve`: the HTTP API (src/server/api.h) on http::Server, with the box registry and
// its warm pools, until SIGTERM or SIGINT (or, with --exit-on-stdin-eof, its stdin's end); then
// it stops accepting, lets requests in flight finish (--drain), destroys every box and exits 0.
// docs/server.md describes it.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "base/fs.h"
#include "options/option_text.h"
#include "cli/box_flags.h"
#include "cli/commands.h"
#include "codebox/host.h"
#include "codebox/option_schema.h"
#include "http/address.h"
#include "http/server.h"
#include "server/api.h"
#include "server/box_id.h"
#include "server/box_registry.h"
#include "server/image_pulls.h"
#include "server/json_log.h"
#include "server/metrics.h"
#include "server/peers.h"
#include "server/tenants.h"

namespace codebox::cli {
namespace {

constexpr const char kServeHelp[] = R"(usage: codebox serve [options] [box options]

Serves the codebox HTTP API (docs/server.md) and MCP over Streamable HTTP at
/mcp (docs/mcp.md) until SIGTERM or SIGINT, then drains requests in flight,
destroys every box and exits 0. Logs are JSON lines on stderr.

options:
  --listen ADDR        where to listen (repeatable): unix:PATH, HOST:PORT,
                       [::1]:PORT (default unix:/run/codebox/codebox.sock for
                       root, else the user's runtime dir); TCP other than
                       loopback needs --token-file
  --token-file F       bearer tokens, one a line (blank and # lines ignored); F
                       must not be readable by group or others (chmod 600). A
                       line is TOKEN [tenant=NAME] [admin] [max-boxes=N]
                       [max-requests=N]: a tenant sees only its own boxes and
                       sessions (tokens of one tenant share them; a token
                       without tenant= is a tenant of its own), admin sees all
  --tenant-max-boxes N boxes one tenant holds at once (default 64); past it 429
  --tenant-max-requests N  requests of one tenant in flight (default 64)
  --pool SPEC          a warm pool, IMAGE=N[,KEY=VALUE...] (repeatable), KEY a
                       box option (driver, memory, cpus, ...) or kernel=1 to
                       start the kernel too
  --max-boxes N        boxes held at once, pool boxes included (default 256);
                       past it 429
  --idle-timeout S     destroy a box (end an MCP session) no request used for S
                       seconds (default 600; none)
  --max-lifetime S     the longest a box lives (default 3600; none)
  --max-body MiB       the largest request body (default 64)
  --max-connections N  open TCP connections, all listeners together (default
                       1024); the unix socket has 256 of its own; past it the
                       oldest idle one is closed, else the new one
  --max-connections-per-address N  open TCP connections of one client address
                       (an IPv6 /64) (default 128; raise it behind a proxy)
  --drain S            on SIGTERM, how long requests in flight may take
                       (default 30)
  --exit-on-stdin-eof  stop as on SIGTERM when stdin reaches its end: a parent
                       that holds the pipe's other end takes the server down
                       with it when it exits, even by kill -9
  --private-dir DIR    a directory of this server's own (this user's, mode
                       0700, e.g. its socket's): removed with everything in it
                       when the server stops

ceilings: the most any request may ask for; more is refused (400) naming the
option, the value and the ceiling; a timeout of none gets the ceiling:
  --max-output-limit SIZE  output_limit_bytes (default 64M)
  --max-memory MiB     memory_mib (default 8192)
  --max-cpus N         cpus (default: this host's cores)
  --max-disk MiB       disk_mib (default 16384)
  --max-box-processes N    max_processes (default 4096)
  --max-box-open-files N   max_open_files (default 65536)
  --max-exec-timeout S an exec's timeout and exec_timeout (default 3600; none)
  --max-network-bytes SIZE  network_max_bytes (default 4G)
  --log-format FMT     json (default) or text (the request lines as plain text)

image pulls for clients (docs/images.md): a box's OCI image that the store
lacks is pulled only from the registries allowed here (none by default; images
already in the store work whatever their registry; pre-pull others with
codebox image pull), and never from a loopback, private, link-local (cloud
metadata), CGNAT or multicast address unless named below:
  --allow-registry HOST[:PORT]  a registry pulls for clients may use
                       (repeatable; *.DOMAIN for the names below it; HOST
                       alone: its default port); e.g. docker.io, ghcr.io
  --allow-registry-address CIDR  addresses a pull may reach though internal
                       (repeatable), e.g. 10.0.0.0/8 for a registry on the LAN

scale-out (docs/scale-out.md): one serve per node; a box id names its node and
any replica forwards a request to it:
  --node NAME          this node's name in box ids (default: $POD_IP in a
                       Kubernetes pod, else the host name)
  --peers LIST         the other replicas, HOST:PORT[,HOST:PORT...]
                       (repeatable)
  --peers-dns NAME:PORT  a DNS name whose records are every replica (a
                       headless Service), looked up again every few seconds
  --peer-refresh S     how often peers are looked up and asked (default 5)
  --drivers LIST       what this node offers placement: jail and/or vm
                       (default: what runs here; vm only with kvm)

E2B's SDKs (docs/e2b.md): set E2B_API_URL and E2B_SANDBOX_URL to a --listen
HOST:PORT's http://HOST:PORT and E2B_API_KEY to a token:
  --e2b-template ID=IMAGE  the image an E2B template id starts (repeatable;
                       base is python and code-interpreter-v1 python-data
                       unless given; any other id is taken as an image name)

the playground (http://HOST:PORT/ of a --listen HOST:PORT) and its chat tab
(POST /v1/ask):
  --model M            the model the chat asks (default $CODEBOX_MODEL, else
                       gpt-4o-mini)
  --base-url URL       its OpenAI-compatible endpoint (default
                       $OPENAI_BASE_URL, else the OpenAI API); the key comes
                       from this server's $OPENAI_API_KEY and is never sent to
                       a client or into a box. Without --model or --base-url,
                       /v1/ask answers 409.

The box options below are the defaults of every box; a request's options start
from them.

)";

struct ServeFlags {
  std::vector<std::string> listen;
  std::string token_file;
  std::vector<std::string> pools;
  std::map<std::string, std::string> e2b_templates;  // --e2b-template, over the defaults
  uint32_t max_boxes = 256;
  std::chrono::milliseconds idle_timeout = std::chrono::seconds(600);
  std::chrono::milliseconds max_lifetime = std::chrono::seconds(3600);
  uint64_t max_body_mib = 64;
  uint32_t max_connections = 1024;
  uint32_t max_connections_per_address = 128;
  server::Ceilings ceilings;  // box_lifetime is --max-lifetime
  server::TenantLimits tenant_limits;
  std::chrono::milliseconds drain = std::chrono::seconds(30);
  bool exit_on_stdin_eof = false;
  std::string private_dir;  // removed when the server stops
  bool text_log = false;
  std::string model;
  std::string base_url;
  std::string node;  // empty: server::DefaultNodeName()
  std::vector<http::Address> peers;
  std::string peers_dns_name;
  uint16_t peers_dns_port = 0;
  std::chrono::milliseconds peer_refresh = std::chrono::seconds(5);
  std::vector<std::string> drivers;  // empty: what this host runs
  server::PullPolicy pulls;          // --allow-registry, --allow-registry-address
  BoxOptions defaults;
};

// "a,b,c" as its non-empty parts.
std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// "--flag VALUE" or "--flag=VALUE" for `name`: true and *value set when args[*i] is it.
StatusOr<bool> TakeValue(const std::vector<std::string>& args, size_t* i, std::string_view name,
                         std::string* value) {
  const std::string& arg = args[*i];
  if (arg.size() > name.size() && arg.compare(0, name.size(), name) == 0 &&
      arg[name.size()] == '=') {
    *value = arg.substr(name.size() + 1);
    return true;
  }
  if (arg != name) return false;
  if (*i + 1 >= args.size()) return InvalidArgument(std::string(name) + " needs a value");
  *value = args[++*i];
  return true;
}

StatusOr<uint64_t> ParseCount(const std::string& flag, const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos ||
      text.size() > 9) {
    return InvalidArgument(flag + ": '" + text + "' is not a whole number");
  }
  return std::stoull(text);
}

// A size in bytes: "4096", "64M", "4G".
StatusOr<uint64_t> ParseBytes(const std::string& flag, const std::string& text) {
  OptionMatch match = FindOption(BoxOptionSchema(), "output_limit_bytes");
  auto value = options::ParseOptionText(*match.spec, nullptr, text);
  if (!value.ok()) return value.status().WithContext(flag);
  // A size comes back as an integer or a number ("8M" is 8 * 2^20, "1.5K" 1536).
  const bool number = value->kind() == OptionValue::Kind::kInteger ||
                      value->kind() == OptionValue::Kind::kNumber;
  const double bytes = number ? value->as_number() : 0;
  if (!(bytes >= 1) || bytes > 9.0e18 || bytes != static_cast<double>(static_cast<uint64_t>(bytes))) {
    return InvalidArgument(flag + ": '" + text + "' is not a whole number of bytes, at least 1");
  }
  return static_cast<uint64_t>(bytes);
}

// --private-dir is removed recursively at exit, so a typo must not name a shared directory:
// only an absolute path to a real directory (no symlink) of this user that no one else can
// enter qualifies.
Status CheckPrivateDir(const std::string& dir) {
  struct stat st {};
  if (dir.empty() || dir[0] != '/' || dir == "/" || lstat(dir.c_str(), &st) != 0 ||
      !S_ISDIR(st.st_mode)) {
    return InvalidArgument("--private-dir: '" + dir + "' is not an absolute path to a directory");
  }
  if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    return InvalidArgument("--private-dir: '" + dir +
                           "' must be this user's and mode 0700 (it is removed when the server "
                           "stops)");
  }
  return Status::Ok();
}

// Set by StopAtStdinEof before its SIGTERM, so the log says why the server stops.
std::atomic<bool> stdin_closed{false};

// --exit-on-stdin-eof: reads stdin to its end (what comes is discarded), then raises SIGTERM,
// which the main thread's sigwait takes as any other stop. Detached: it blocks in read() until
// then, and the process may exit first.
void StopAtStdinEof() {
  std::thread([] {
    char buf[256];
    for (;;) {
      ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
      if (n > 0 || (n < 0 && errno == EINTR)) continue;
      break;  // 0: end of file; any other error: stdin is gone too
    }
    stdin_closed = true;
    kill(getpid(), SIGTERM);
  }).detach();
}

StatusOr<ServeFlags> ParseServeFlags(const std::vector<std::string>& args) {
  ServeFlags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    ASSIGN_OR_RETURN(bool box_flag, ParseBoxFlag(args, &i, &flags.defaults));
    if (box_flag) continue;
    // is("--x") consumes --x and its value into v; a missing value is kept in `missing`.
    std::string v;
    Status missing;
    auto is = [&](std::string_view name) {
      StatusOr<bool> hit = TakeValue(args, &i, name, &v);
      if (!hit.ok()) missing = hit.status();
      return hit.ok() && *hit;
    };
    if (is("--listen")) {
      flags.listen.push_back(v);
    } else if (is("--token-file")) {
      flags.token_file = v;
    } else if (is("--pool")) {
      flags.pools.push_back(v);
    } else if (is("--e2b-template")) {
      const size_t eq = v.find('=');
      if (eq == 0 || eq == std::string::npos || eq + 1 == v.size()) {
        return InvalidArgument("--e2b-template: '" + v + "' is not TEMPLATE_ID=IMAGE");
      }
      flags.e2b_templates[v.substr(0, eq)] = v.substr(eq + 1);
    } else if (is("--max-boxes")) {
      ASSIGN_OR_RETURN(uint64_t n, ParseCount("--max-boxes", v));
      if (n == 0) return InvalidArgument("--max-boxes must be at least 1");
      flags.max_boxes = static_cast<uint32_t>(n);
    } else if (is("--idle-timeout")) {
      ASSIGN_OR_RETURN(flags.idle_timeout, ParseTimeout(v));
    } else if (is("--max-lifetime")) {
      ASSIGN_OR_RETURN(flags.max_lifetime, ParseTimeout(v));
    } else if (is("--max-output-limit")) {
      ASSIGN_OR_RETURN(flags.ceilings.output_limit_bytes, ParseBytes("--max-output-limit", v));
    } else if (is("--max-network-bytes")) {
      ASSIGN_OR_RETURN(flags.ceilings.network_max_bytes, ParseBytes("--max-network-bytes", v));
    } else if (is("--max-memory")) {
      ASSIGN_OR_RETURN(flags.ceilings.memory_mib, ParseMebibytes(v));
    } else if (is("--max-disk")) {
      ASSIGN_OR_RETURN(flags.ceilings.disk_mib, ParseMebibytes(v));
    } else if (is("--max-cpus")) {
      char* end = nullptr;
      double cpus = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(cpus > 0) || cpus > 1024) {
        return InvalidArgument("--max-cpus: '" + v + "' is not a number of cores above 0");
      }
      flags.ceilings.cpus = cpus;
    } else if (is("--max-box-processes")) {
      ASSIGN_OR_RETURN(uint64_t n, ParseCount("--max-box-processes", v));
      flags.ceilings.max_processes = static_cast<uint32_t>(n);
    } else if (is("--max-box-open-files")) {
      ASSIGN_OR_RETURN(uint64_t n, ParseCount("--max-box-open-files", v));
      flags.ceilings.max_open_files = static_cast<uint32_t>(n);
    } else if (is("--max-exec-timeout")) {
      ASSIGN_OR_RETURN(flags.ceilings.exec_timeout, ParseTimeout(v));
    } else if (is("--max-connections")) {
      ASSIGN_OR_RETURN(uint64_t n, ParseCount("--max-connections", v));
      if (n == 0) return InvalidArgument("--max-connections must be at least 1");
      flags.max_connections = static_cast<uint32_t>(n);
    } else if (is("--max-connections-per-address")) {
      ASSIGN_OR_RETURN(uint64_t n, ParseCount("--max-connections-per-address", v));
      if (n == 0) return InvalidArgument("--max-connections-per-address must be at least 1");
      flags.max_connections_per_address = static_cast<uint32_t>(n);
    } else if (is("--tenant-max-boxes")) {
      ASSIGN_OR_RETURN(uint64_t n, ParseCount("--tenant-max-boxes", v));
      if (n == 0) return InvalidArgument("--tenant-max-boxes must be at least 1");
      flags.tenant_limits.max_boxes = static_cast<uint32_t>(n);
    } else if (is("--tenant-max-requests")) {
      ASSIGN_OR_RETURN(uint64_t n, ParseCount("--tenant-max-requests", v));
      if (n == 0) return InvalidArgument("--tenant-max-requests must be at least 1");
      flags.tenant_limits.max_requests = static_cast<uint32_t>(n);
    } else if (is("--max-body")) {
      ASSIGN_OR_RETURN(flags.max_body_mib, ParseMebibytes(v));
      if (flags.max_body_mib == 0) return InvalidArgument("--max-body must be at least 1 MiB");
    } else if (is("--drain")) {
      ASSIGN_OR_RETURN(flags.drain, ParseDuration(v));
    } else if (args[i] == "--exit-on-stdin-eof") {
      flags.exit_on_stdin_eof = true;
    } else if (is("--private-dir")) {
      flags.private_dir = v;
    } else if (is("--model")) {
      flags.model = v;
    } else if (is("--base-url")) {
      flags.base_url = v;
    } else if (is("--node")) {
      RETURN_IF_ERROR(server::CheckNodeName(v, "--node"));
      flags.node = v;
    } else if (is("--peers")) {
      for (const std::string& part : SplitList(v)) {
        auto address = http::ParseAddress(part);
        if (!address.ok()) return address.status().WithContext("--peers");
        if (address->kind != http::Address::Kind::kTcp) {
          return InvalidArgument("--peers: '" + part + "' is not HOST:PORT");
        }
        flags.peers.push_back(*address);
      }
    } else if (is("--peers-dns")) {
      RETURN_IF_ERROR(server::ParseDnsPeers(v, &flags.peers_dns_name, &flags.peers_dns_port));
    } else if (is("--peer-refresh")) {
      auto refresh = ParseDuration(v);
      if (!refresh.ok()) return refresh.status().WithContext("--peer-refresh");
      flags.peer_refresh = *refresh;
      if (flags.peer_refresh < std::chrono::milliseconds(100)) {
        return InvalidArgument("--peer-refresh must be at least 0.1 s");
      }
    } else if (is("--drivers")) {
      flags.drivers.clear();
      for (const std::string& name : SplitList(v)) {
        if (name != "jail" && name != "vm") {
          return InvalidArgument("--drivers: '" + name + "' is neither jail nor vm");
        }
        flags.drivers.push_back(name);
      }
      if (flags.drivers.empty()) return InvalidArgument("--drivers needs jail and/or vm");
    } else if (is("--allow-registry")) {
      ASSIGN_OR_RETURN(net::HostPattern registry, server::ParseAllowedRegistry(v));
      flags.pulls.registries.push_back(registry);
    } else if (is("--allow-registry-address")) {
      ASSIGN_OR_RETURN(net::AddressRange range, server::ParseAllowedRegistryAddress(v));
      flags.pulls.addresses.push_back(range);
    } else if (is("--log-format")) {
      if (v != "json" && v != "text") {
        return InvalidArgument("--log-format: '" + v + "' is neither json nor text");
      }
      flags.text_log = v == "text";
    } else if (!missing.ok()) {
      return missing;
    } else {
      return InvalidArgument("unknown option '" + args[i] + "'" + BoxFlagHint(args[i]) +
                             " (see codebox serve --help)");
    }
  }
  RETURN_IF_ERROR(ValidateForCli(flags.defaults));
  if (!flags.defaults.server.empty() || !flags.defaults.server_token.empty()) {
    return InvalidArgument(
        "--server and --server-token name a server to use, not one to be; "
        "use --listen and --token-file");
  }
  if (flags.listen.empty()) flags.listen.push_back("unix:" + http::DefaultSocketPath());
  if (!flags.private_dir.empty()) RETURN_IF_ERROR(CheckPrivateDir(flags.private_dir));
  flags.ceilings.box_lifetime = flags.max_lifetime;
  // The server's own defaults must be within what it grants, or every request would fail.
  BoxOptions within = flags.defaults;
  Status fits = server::ApplyCeilings(&within, flags.ceilings);
  if (!fits.ok()) {
    return InvalidArgument("the box flags ask for more than the ceilings allow: " +
                           fits.message() + "; lower the box flag or raise the ceiling");
  }
  return flags;
}

std::string Join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

void LogRequest(const server::RequestReport& r, bool text) {
  int64_t ms = static_cast<int64_t>(r.seconds * 1000);
  if (text) {
    std::string line = r.request.request_id + " " + r.request.method + " " + std::string(r.route) +
                       " " + std::to_string(r.status) + " " + std::to_string(ms) + "ms";
    if (!r.box_id.empty()) line += " box=" + std::string(r.box_id);
    if (!r.tenant.empty()) line += " tenant=" + std::string(r.tenant);
    if (!r.error.ok()) line += " error=" + r.error.ToString();
    std::fprintf(stderr, "%s\n", line.c_str());
    return;
  }
  base::LogLevel level = r.status >= 500 ? base::LogLevel::kWarn : base::LogLevel::kInfo;
  server::JsonLog::Write(level, "request",
                         {{"request_id", r.request.request_id},
                          {"method", r.request.method},
                          {"route", r.route},
                          {"status", r.status},
                          {"ms", ms},
                          {"box", r.box_id},
                          {"tenant", r.tenant},
                          {"peer", r.request.peer},
                          {"error", r.error.ok() ? std::string() : r.error.ToString()}});
}

// What this host runs, for placement: vm only where kvm works (a vm under tcg is far too slow
// to be placed on by choice).
std::vector<std::string> DriversHere() {
  HostDescription host = DescribeHost();
  std::vector<std::string> drivers;
  if (host.jail.usable) drivers.push_back("jail");
  if (host.vm.kvm_usable) drivers.push_back("vm");
  return drivers;
}

int Serve(const ServeFlags& flags) {
  // SIGTERM and SIGINT are taken by sigwait below, so every thread started from here on must
  // have them blocked; a peer that closes early must not kill the server with SIGPIPE.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  if (!flags.text_log) server::JsonLog::RouteLibraryLog();
  // Before anything slow starts: a parent that died during the start-up still stops us.
  if (flags.exit_on_stdin_eof) StopAtStdinEof();
  // The private directory goes on every way out of Serve from here on.
  struct RemoveAtExit {
    const std::string& dir;
    ~RemoveAtExit() {
      if (!dir.empty()) (void)base::RemoveTree(dir);
    }
  } remove_private_dir{flags.private_dir};

  http::ServerOptions http_options;
  for (const std::string& text : flags.listen) {
    auto address = http::ParseAddress(text);
    if (!address.ok()) return PrintError("serve", address.status()), kExitUsage;
    http_options.listen.push_back(*address);
  }
  std::vector<server::TokenGrant> grants;
  if (!flags.token_file.empty()) {
    auto read = server::ReadTokenFile(flags.token_file);
    if (!read.ok()) return PrintError("serve", read.status()), kExitUsage;
    grants = std::move(*read);
    for (const server::TokenGrant& grant : grants) http_options.tokens.push_back(grant.token);
  }
  http_options.max_body_bytes = flags.max_body_mib << 20;
  http_options.max_connections = flags.max_connections;
  http_options.max_connections_per_address = flags.max_connections_per_address;
  http_options.public_paths = server::PublicPaths();
  http_options.handler_authenticates = server::HandlerAuthenticates;

  server::RegistryOptions registry_options;
  registry_options.max_boxes = flags.max_boxes;
  registry_options.idle_timeout = flags.idle_timeout;
  registry_options.max_lifetime = flags.max_lifetime;
  registry_options.defaults = flags.defaults;
  registry_options.node = flags.node.empty() ? server::DefaultNodeName() : flags.node;
  std::vector<std::string> pool_texts;
  for (const std::string& text : flags.pools) {
    auto spec = server::ParsePoolSpec(text, flags.defaults);
    if (!spec.ok()) {
      PrintError("serve", spec.status().WithContext("--pool " + text));
      return kExitUsage;
    }
    registry_options.pools.push_back(*spec);
    pool_texts.push_back(text);
  }
  // A client's box pulls only as the operator allows; the images of the pools and of the
  // box defaults (--image) are the operator's own.
  server::PullPolicy pull_policy = flags.pulls;
  pull_policy.operator_images.push_back(flags.defaults.image);
  for (const server::PoolSpec& spec : registry_options.pools) {
    pull_policy.operator_images.push_back(spec.options.image);
  }
  server::ImagePulls pulls(pull_policy);
  server::BoxRegistry registry(registry_options);
  server::Metrics metrics;

  server::PeerOptions peer_options;
  peer_options.node = registry.node();
  peer_options.addresses = flags.peers;
  peer_options.dns_name = flags.peers_dns_name;
  peer_options.dns_port = flags.peers_dns_port;
  peer_options.refresh = flags.peer_refresh;
  if (!http_options.tokens.empty()) peer_options.token = http_options.tokens.front();
  server::Peers peers(peer_options);

  server::ApiOptions api_options;
  api_options.defaults = flags.defaults;
  api_options.ceilings = flags.ceilings;
  api_options.grants = grants;
  api_options.tenant_limits = flags.tenant_limits;
  api_options.max_boxes = flags.max_boxes;
  for (const auto& [id, image] : flags.e2b_templates) api_options.e2b_templates[id] = image;
  api_options.max_inflated_bytes = flags.max_body_mib << 20;
  api_options.ask.model = flags.model;
  api_options.ask.base_url = flags.base_url;
  api_options.ask.configured = !flags.model.empty() || !flags.base_url.empty();
  if (const char* key = std::getenv("OPENAI_API_KEY")) api_options.ask.api_key = key;
  api_options.idle_timeout = flags.idle_timeout;
  api_options.tokens_required = !http_options.tokens.empty();
  api_options.peers = &peers;
  api_options.drivers = flags.drivers.empty() ? DriversHere() : flags.drivers;
  api_options.max_forward_bytes = std::max<uint64_t>(http_options.max_body_bytes, 512ull << 20);
  api_options.pulls = &pulls;
  const bool text_log = flags.text_log;
  api_options.hooks.on_request = [&metrics, text_log](const server::RequestReport& r) {
    metrics.ObserveRequest(r.request.method, r.route, r.status, r.seconds, r.tenant);
    LogRequest(r, text_log);
  };
  api_options.hooks.on_exec = [&metrics](std::string_view kind, double s) {
    metrics.ObserveExec(kind, s);
  };
  api_options.hooks.on_error = [&metrics](std::string_view code) { metrics.CountError(code); };
  // Every connection of a box's egress proxy: one log line (the audit trail) and the counters.
  api_options.hooks.on_egress = [&metrics](std::string_view box, const EgressRecord& r) {
    metrics.ObserveEgress(r);
    server::JsonLog::Write(r.allowed ? base::LogLevel::kInfo : base::LogLevel::kWarn, "egress",
                           {{"box", box},
                            {"host", r.host},
                            {"port", r.port},
                            {"allowed", r.allowed},
                            {"reason", r.reason},
                            {"address", r.address},
                            {"bytes_up", r.bytes_up},
                            {"bytes_down", r.bytes_down}});
  };
  api_options.hooks.metrics_text = [&metrics, &registry](const server::Caller& caller) {
    return metrics.Render(registry, caller);
  };

  for (const http::Address& a : http_options.listen) api_options.listen.push_back(a.ToString());
  server::Api api(api_options, &registry);
  http::Server http_server(http_options, &api);
  Status started = http_server.Start();
  if (!started.ok()) return PrintError("serve", started), kExitCodeboxError;
  registry.Start();
  peers.Start();  // after Start: a replica listed among its own peers answers itself
  std::vector<std::string> bound_texts;  // a TCP port 0 resolved
  for (const http::Address& a : http_server.bound()) bound_texts.push_back(a.ToString());
  std::printf("codebox serve: listening on %s; node %s; pools: %s\n",
              Join(bound_texts, ", ").c_str(), registry.node().c_str(),
              pool_texts.empty() ? "none" : Join(pool_texts, ", ").c_str());
  std::fflush(stdout);
  // The start line went to stdout; the log has it too, in the log's format.
  if (text_log) {
    std::fprintf(stderr, "listening on %s\n", Join(bound_texts, ", ").c_str());
  } else {
    server::JsonLog::Write(base::LogLevel::kInfo, "listening",
                           {{"listen", bound_texts},
                            {"pools", pool_texts},
                            {"node", registry.node()},
                            {"incarnation", registry.incarnation()},
                            {"drivers", api_options.drivers},
                            {"peers", peers.enabled()}});
  }

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  const char* signal_name = signal_number == SIGTERM ? "SIGTERM" : "SIGINT";
  if (stdin_closed) signal_name = "stdin closed";
  if (text_log) {
    std::fprintf(stderr, "stopping (%s): draining for up to %.1f s\n", signal_name,
                 flags.drain.count() / 1000.0);
  } else {
    server::JsonLog::Write(base::LogLevel::kInfo, "stopping",
                           {{"signal", signal_name}, {"drain_s", flags.drain.count() / 1000.0}});
  }
  http_server.Stop(flags.drain);
  peers.Stop();
  registry.Shutdown();
  if (text_log) {
    std::fprintf(stderr, "stopped\n");
  } else {
    server::JsonLog::Write(base::LogLevel::kInfo, "stopped", {});
  }
  return 0;
}

}  // namespace

int ServeCommand(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      std::printf("%s%s", kServeHelp, BoxFlagsHelp().c_str());
      return 0;
    }
  }
  auto flags = ParseServeFlags(args);
  if (!flags.ok()) return PrintError("serve", flags.status()), kExitUsage;
  return Serve(*flags);
}

}  // namespace codebox::cli
