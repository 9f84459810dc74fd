// The option tables: each BoxOptions and ExecOptions field once, with its description and
// checks. The generic reading and writing of a field by its type is in options_fields.h.
#include <cctype>

#include "base/json.h"
#include "base/text.h"
#include "codebox/option_schema.h"
#include "http/address.h"
#include "image/oci_reference.h"
#include "net/egress_policy.h"
#include "options/options_fields.h"

namespace codebox {
namespace {

using options::Entry;

Status CheckImageName(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 64 && name[0] != '.';
  for (char c : name) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
  }
  if (ok) return Status::Ok();
  // Or an OCI image: "python:3.12-slim", "ghcr.io/org/app@sha256:...".
  auto ref = image::ParseImageReference(name);
  if (ref.ok()) return Status::Ok();
  return InvalidArgument("image name '" + base::Excerpt(name) +
                         "' is neither a recipe's name (letters, digits, '-', '_', '.'; at most "
                         "64) nor an OCI reference: " +
                         base::Excerpt(ref.status().message(), 160));
}

Status CheckAbsolutePath(const std::string& path) {
  if (!path.empty() && path[0] == '/') return Status::Ok();
  return InvalidArgument("must be an absolute path inside the box, got '" + base::Excerpt(path) +
                         "'");
}

// Empty (the default), a user name as useradd takes it, or UID[:GID]; whether the image has
// it is seen when the box starts.
Status CheckUserName(const std::string& user) {
  if (user.empty() || base::IsUserName(user)) return Status::Ok();
  const bool ids = user.find_first_not_of("0123456789:") == std::string::npos &&
                   user.front() != ':' && user.back() != ':' && user.find(':') == user.rfind(':') &&
                   user.size() <= 21;
  if (ids) return Status::Ok();
  return InvalidArgument("user '" + base::Excerpt(user) +
                         "' is neither a user name (a-z, 0-9, '_', '-'; at most 32) nor UID[:GID]");
}

// Empty: in this process; else an address http::ParseAddress takes.
Status CheckServerAddress(const std::string& server) {
  if (server.empty()) return Status::Ok();
  auto address = http::ParseAddress(server);
  return address.ok() ? Status::Ok() : address.status();
}

// An allowlist entry as the egress policy takes it; its errors name the entry.
Status CheckHostPattern(const std::string& entry) {
  auto pattern = net::ParseHostPattern(entry);
  return pattern.ok() ? Status::Ok() : pattern.status();
}

constexpr double kMaxMebibytes = 1 << 20;  // 1 TiB
constexpr double kMaxSeconds = 1e9;

const std::vector<Entry<BoxOptions>>& BoxEntries() {
  static const auto* entries = new std::vector<Entry<BoxOptions>>{
      {{.name = "image",
        .type = OptionType::kString,
        .help = "image to run: a recipe's name (`codebox image build NAME`) or an OCI "
                "reference (python:3.12-slim; pulled on first use)",
        .value_name = "NAME"},
       &BoxOptions::image,
       CheckImageName},
      {{.name = "driver",
        .type = OptionType::kChoice,
        .help = "isolation: auto takes the strongest driver that runs at full speed on this host",
        .choices = {"auto", "jail", "vm"},
        .shapes_box = false},
       &BoxOptions::driver},
      {{.name = "allow_emulation",
        .type = OptionType::kBool,
        .help = "vm driver: allow QEMU software emulation (tcg) where there is no kvm (slow)",
        .shapes_box = false},
       &BoxOptions::allow_emulation},
      {{.name = "no_snapshot",
        .type = OptionType::kBool,
        .help = "vm driver: boot the kernel instead of restoring a saved template machine",
        .shapes_box = false},
       &BoxOptions::no_snapshot},
      {{.name = "no_fallback",
        .type = OptionType::kBool,
        .help = "vm driver: fail when restoring from a template fails, instead of booting",
        .shapes_box = false},
       &BoxOptions::no_fallback},
      {{.name = "cpus",
        .type = OptionType::kNumber,
        .help = "CPU share, may be fractional (1 = one core)",
        .has_bounds = true,
        .min = 0,
        .min_exclusive = true,
        .max = 256},
       &BoxOptions::cpus},
      {{.name = "memory_mib",
        .type = OptionType::kSize,
        .unit = "MiB",
        .help = "memory limit of the whole box (no swap)",
        .aliases = {{"memory"}},
        .has_bounds = true,
        .min = 32,
        .max = kMaxMebibytes},
       &BoxOptions::memory_mib},
      {{.name = "disk_mib",
        .type = OptionType::kSize,
        .unit = "MiB",
        .help = "size of the writable scratch layer (/work, /tmp, /root, /data)",
        .aliases = {{"disk"}, {"disk_size_gb", 1024, "GiB"}},
        .has_bounds = true,
        .min = 1,
        .max = kMaxMebibytes},
       &BoxOptions::disk_mib},
      {{.name = "max_processes",
        .type = OptionType::kInteger,
        .help = "most processes and threads in the box",
        .aliases = {{"pids"}},
        .has_bounds = true,
        .min = 1,
        .max = 1 << 22},
       &BoxOptions::max_processes},
      {{.name = "max_open_files",
        .type = OptionType::kInteger,
        .help = "most open files per process (RLIMIT_NOFILE, `ulimit -n`)",
        .has_bounds = true,
        .min = 16,
        .max = 1 << 20},
       &BoxOptions::max_open_files},
      {{.name = "exec_timeout",
        .type = OptionType::kDuration,
        .unit = "s",
        .help = "default wall-clock limit of each exec; none: no limit (Python: None)",
        .aliases = {{"timeout"}},
        .has_bounds = true,
        .min = 0.001,
        .max = kMaxSeconds,
        .allows_none = true,
        .shapes_box = false},
       &BoxOptions::exec_timeout},
      {{.name = "box_timeout",
        .type = OptionType::kDuration,
        .unit = "s",
        .help = "wall-clock limit of the whole box: past it every exec fails and the box ends",
        .has_bounds = true,
        .min = 0.001,
        .max = kMaxSeconds,
        .allows_none = true,
        .shapes_box = false},
       &BoxOptions::box_timeout},
      {{.name = "env",
        .type = OptionType::kEnvironment,
        .help = "environment of every exec (PATH, HOME, LANG are set unless given); nothing "
                "of the host's environment enters the box",
        .shapes_box = false},
       &BoxOptions::env},
      {{.name = "workdir",
        .type = OptionType::kString,
        .help = "working directory in the box, made on the scratch layer",
        .aliases = {{"working_dir"}},
        .value_name = "DIR"},
       &BoxOptions::workdir,
       CheckAbsolutePath},
      {{.name = "user",
        .type = OptionType::kString,
        .help = "who the box's processes run as: empty: the image's user; root; or a name or "
                "UID[:GID] from the image's /etc/passwd (every recipe image has user, uid 1000)",
        .value_name = "USER"},
       &BoxOptions::user,
       CheckUserName},
      {{.name = "output_limit_bytes",
        .type = OptionType::kSize,
        .unit = "bytes",
        .help = "bytes of stdout and of stderr kept per exec; the rest is dropped and flagged",
        .aliases = {{"output_limit"}},
        .has_bounds = true,
        .min = 1,
        .max = kMaxMebibytes * (1 << 20),
        .shapes_box = false},
       &BoxOptions::output_limit_bytes},
      {{.name = "network",
        .type = OptionType::kChoice,
        .help = "the box's way out, through the host's egress proxy: none (the default), allow "
                "(only the hosts of allow_hosts; giving allow_hosts implies it) or open (any "
                "public address; never internal ones)",
        .choices = {"none", "allow", "open"}},
       &BoxOptions::network},
      {{.name = "allow_hosts",
        .type = OptionType::kList,
        .help = "a host the box may reach: pypi.org, *.example.org (names below it), an IP "
                "literal (an internal address only this way), each with an optional :PORT "
                "(else 80 and 443); at most 256; implies network allow",
        .aliases = {{"allow_host"}},
        .value_name = "HOST",
        .flag_name = "allow_host"},
       &BoxOptions::allow_hosts,
       CheckHostPattern},
      {{.name = "secrets",
        .type = OptionType::kList,
        .help = "a value the box uses only by placeholder: NAME=VALUE@HOST[,HOST]; the box's "
                "$NAME holds <CODEBOX_SECRET:NAME>, which the host's proxy replaces with VALUE "
                "in requests to those hosts only (HTTPS there is intercepted with the box's own "
                "CA); at most 32; implies network allow",
        .aliases = {{"secret"}},
        .value_name = "NAME=VALUE@HOST",
        .flag_name = "secret"},
       &BoxOptions::secrets},
      {{.name = "network_max_bytes",
        .type = OptionType::kSize,
        .unit = "bytes",
        .help = "bytes all the box's connections may move, both ways together; past it they "
                "are cut",
        .has_bounds = true,
        .min = 1,
        .max = kMaxMebibytes * (1 << 20)},
       &BoxOptions::network_max_bytes},
      {{.name = "network_rate_bytes",
        .type = OptionType::kSize,
        .unit = "bytes/s",
        .help = "bytes per second one connection may move, both ways together; 0: no limit",
        .has_bounds = true,
        .min = 0,
        .max = kMaxMebibytes * (1 << 20)},
       &BoxOptions::network_rate_bytes},
      {{.name = "prestart",
        .type = OptionType::kBool,
        .help = "keep one started, never-used spare box with these options, so the next box "
                "with them starts at once (an idle jail, or a vm restored from its template and "
                "paused, while this process runs)",
        .shapes_box = false},
       &BoxOptions::prestart},
      {{.name = "home",
        .type = OptionType::kString,
        .help = "where images and kernels live; empty: $CODEBOX_HOME, else /var/lib/codebox "
                "for root, else ~/.local/share/codebox",
        .value_name = "DIR"},
       &BoxOptions::home},
      {{.name = "server",
        .type = OptionType::kString,
        .help = "run the box on a codebox server: unix:PATH or http://HOST:PORT; empty: in "
                "this process",
        .value_name = "URL",
        .shapes_box = false},
       &BoxOptions::server,
       CheckServerAddress},
      {{.name = "server_token",
        .type = OptionType::kString,
        .help = "bearer token for --server (prefer $CODEBOX_TOKEN: a flag shows in ps)",
        .aliases = {{"token"}},
        .value_name = "TOKEN",
        .shapes_box = false},
       &BoxOptions::server_token},
  };
  return *entries;
}

const std::vector<Entry<ExecOptions>>& ExecEntries() {
  static const auto* entries = new std::vector<Entry<ExecOptions>>{
      {{.name = "env",
        .type = OptionType::kEnvironment,
        .help = "added to the box's environment for this exec"},
       &ExecOptions::env},
      {{.name = "cwd",
        .type = OptionType::kString,
        .help = "working directory; empty: the box's workdir; a relative path is under it",
        .value_name = "DIR"},
       &ExecOptions::cwd},
      {{.name = "user",
        .type = OptionType::kString,
        .help = "who this exec runs as: empty: the box's user; root; or the box's user by name",
        .value_name = "USER"},
       &ExecOptions::user,
       CheckUserName},
      {{.name = "stdin_data",
        .type = OptionType::kData,
        .help = "bytes fed to the process's stdin; null: it reads /dev/null",
        .aliases = {{"stdin"}}},
       &ExecOptions::stdin_data},
      {{.name = "timeout",
        .type = OptionType::kDuration,
        .unit = "s",
        .help = "wall-clock limit of this exec; null: the box's exec_timeout; none: no limit",
        .has_bounds = true,
        .min = 0.001,
        .max = kMaxSeconds,
        .allows_none = true},
       &ExecOptions::timeout},
  };
  return *entries;
}

template <class S>
const OptionSchema& SchemaOf(const std::vector<Entry<S>>& entries) {
  auto* schema = new OptionSchema;
  for (const Entry<S>& e : entries) schema->push_back(e.spec);
  return *schema;
}

}  // namespace

const OptionSchema& BoxOptionSchema() {
  static const OptionSchema& schema = SchemaOf(BoxEntries());
  return schema;
}

const OptionSchema& ExecOptionSchema() {
  static const OptionSchema& schema = SchemaOf(ExecEntries());
  return schema;
}

Status SetBoxOption(BoxOptions* options, std::string_view name, const OptionValue& value,
                    std::string_view label) {
  return options::SetOption(BoxEntries(), BoxOptionSchema(), options, name, value, label);
}

Status SetExecOption(ExecOptions* options, std::string_view name, const OptionValue& value,
                     std::string_view label) {
  return options::SetOption(ExecEntries(), ExecOptionSchema(), options, name, value, label);
}

OptionValue GetBoxOption(const BoxOptions& options, std::string_view name) {
  return options::GetOption(BoxEntries(), options, name);
}

OptionValue GetExecOption(const ExecOptions& options, std::string_view name) {
  return options::GetOption(ExecEntries(), options, name);
}

Status ValidateBoxOptions(const BoxOptions& options, OptionLabeler label_of) {
  auto label = [&](std::string_view name) {
    return label_of(*FindOption(BoxOptionSchema(), name).spec);
  };
  // Every field through its own setter: the checks of a value given by name are the checks
  // of the struct filled in by hand.
  for (const OptionSpec& spec : BoxOptionSchema()) {
    BoxOptions scratch;
    RETURN_IF_ERROR(
        SetBoxOption(&scratch, spec.name, GetBoxOption(options, spec.name), label_of(spec)));
  }
  if (options.network == NetworkMode::kOpen && !options.allow_hosts.empty()) {
    const std::string hosts = label("allow_hosts");
    const std::string network = label("network");
    return InvalidArgument(hosts + ": given with " + network +
                           " open, which already allows any public address; give " + network +
                           " allow (or leave " + network +
                           " out) to allow only these hosts, or drop " + hosts);
  }
  return Status::Ok();
}

Status BoxOptions::Validate() const {
  return ValidateBoxOptions(*this, [](const OptionSpec& spec) { return std::string(spec.name); });
}

}  // namespace codebox
