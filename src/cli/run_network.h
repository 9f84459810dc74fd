// The network part of `codebox run` and `codebox exec`: --pip NAME (repeatable) and
// --index-url URL install packages in the box before anything runs in it, and the result says
// what the box's network did ("network" and "egress" in --json; refused connections and an
// open network on stderr otherwise).
#ifndef CODEBOX_CLI_RUN_NETWORK_H_
#define CODEBOX_CLI_RUN_NETWORK_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "codebox/box.h"
#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::cli {

// The box started and ran pip, but the packages could not be installed, so nothing else ran.
inline constexpr int kExitInstallFailed = 126;

struct PipInstall {
  std::vector<std::string> packages;  // --pip, in order
  std::string index_url;              // --index-url; empty: the public package index
  std::optional<ExecResult> result;   // pip's result, once it ran
};

// The help lines of --pip and --index-url.
extern const char kPipFlagsHelp[];

// Consumes --pip NAME or --index-url URL (also --flag=VALUE) at args[*i]; false when it is
// neither.
StatusOr<bool> ParsePipFlag(const std::vector<std::string>& args, size_t* i, PipInstall* pip);

// After every flag: --index-url without --pip is an error; --pip on a box without a network
// policy gives it network allow with no hosts of its own (the index is allowed for the
// install only).
Status ApplyPip(const PipInstall& pip, BoxOptions* box);

// Runs the install when there is one (pip's result kept in pip->result). 0 when the code may
// run; else the exit status, with the error (or pip's stderr and "install failed") printed,
// except under --json, where the caller prints pip's result.
int InstallFirst(const std::string& command, Box* box, PipInstall* pip, bool json);

// --json: adds "network" (the box's mode), "egress" (its connections) and "install" (pip's
// result, when it ran). `box` may be null (a one-shot run on a server: no egress log).
void AddNetworkJson(const BoxOptions& options, const Box* box, const PipInstall& pip,
                    nlohmann::json* out);

// Without --json: says on stderr when the box had an open network, and which connections were
// refused (the first few), so a failed fetch is never a mystery.
void ReportNetwork(const BoxOptions& options, const Box& box);

}  // namespace codebox::cli

#endif  // CODEBOX_CLI_RUN_NETWORK_H_
