#include "cli/run_network.h"

#include <cstdio>

#include "api/egress_record.h"
#include "base/text.h"
#include "cli/box_flags.h"
#include "api/exec_result.h"

namespace codebox::cli {

const char kPipFlagsHelp[] =
    R"(  --pip NAME           pip install NAME in the box before the code runs
                       (repeatable; a requirement like 'pandas==2.2'); gives
                       the box network allow when it has no policy: only the
                       index is reachable, and only for the install. Exit
                       status 126 if the install failed (pip's error is
                       printed)
  --index-url URL      the package index for --pip (default: the public Python
                       package index)
)";

StatusOr<bool> ParsePipFlag(const std::vector<std::string>& args, size_t* i, PipInstall* pip) {
  const std::string& arg = args[*i];
  const size_t eq = arg.find('=');
  const std::string flag = arg.substr(0, eq);
  if (flag != "--pip" && flag != "--index-url") return false;
  std::string value;
  if (eq != std::string::npos) {
    value = arg.substr(eq + 1);
  } else if (*i + 1 < args.size()) {
    value = args[++*i];
  } else {
    return InvalidArgument(flag + " needs a value");
  }
  if (value.empty()) return InvalidArgument(flag + ": the value is empty");
  if (flag == "--pip") {
    pip->packages.push_back(value);
  } else {
    pip->index_url = value;
  }
  return true;
}

Status ApplyPip(const PipInstall& pip, BoxOptions* box) {
  if (pip.packages.empty()) {
    if (!pip.index_url.empty()) return InvalidArgument("--index-url goes with --pip NAME");
    return Status::Ok();
  }
  if (EffectiveNetwork(*box) == NetworkMode::kNone) box->network = NetworkMode::kAllow;
  return Status::Ok();
}

int InstallFirst(const std::string& command, Box* box, PipInstall* pip, bool json) {
  if (pip->packages.empty()) return 0;
  InstallOptions options;
  options.index_url = pip->index_url;
  auto result = box->InstallPackages(pip->packages, options);
  if (!result.ok()) {
    PrintError(command, result.status().WithContext("--pip"));
    return kExitCodeboxError;
  }
  pip->result = std::move(*result);
  if (pip->result->ok()) return 0;
  if (!json) {
    std::string err = base::TerminalSafe(pip->result->stderr_data);
    std::fwrite(err.data(), 1, err.size(), stderr);
    std::string what = pip->result->timed_out ? "timed out" : "failed";
    PrintError(command,
               Status(StatusCode::kFailedPrecondition, "--pip: install " + what +
                                                           " (pip's error is above); the code "
                                                           "did not run"));
  }
  return kExitInstallFailed;
}

void AddNetworkJson(const BoxOptions& options, const Box* box, const PipInstall& pip,
                    nlohmann::json* out) {
  const NetworkMode mode = EffectiveNetwork(options);
  (*out)["network"] = mode == NetworkMode::kNone    ? "none"
                      : mode == NetworkMode::kAllow ? "allow"
                                                    : "open";
  (*out)["egress"] =
      api::EgressLogToJson(box != nullptr ? box->EgressLog() : std::vector<EgressRecord>{});
  if (pip.result) (*out)["install"] = api::ExecResultToJson(*pip.result);
}

void ReportNetwork(const BoxOptions& options, const Box& box) {
  const NetworkMode mode = EffectiveNetwork(options);
  if (mode == NetworkMode::kNone) return;
  const std::vector<EgressRecord> log = box.EgressLog();
  if (mode == NetworkMode::kOpen) {
    std::fprintf(stderr,
                 "codebox: this box had an open network (any public address): %zu "
                 "connection(s)\n",
                 log.size());
  }
  constexpr size_t kShown = 5;
  size_t refused = 0;
  for (const EgressRecord& r : log) {
    if (r.allowed) continue;
    if (++refused <= kShown) {
      std::fprintf(stderr, "codebox: network: refused %s:%u: %s\n",
                   base::TerminalSafe(r.host, 260).c_str(), static_cast<unsigned>(r.port),
                   base::TerminalSafe(r.reason, 300).c_str());
    }
  }
  if (refused > kShown) {
    std::fprintf(stderr, "codebox: network: %zu more refused (--json lists them all)\n",
                 refused - kShown);
  }
}

}  // namespace codebox::cli
