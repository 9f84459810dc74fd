// `codebox status`: a codebox server's boxes and pools (GET /v1/status), as a table or JSON.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/box_record.h"
#include "api/server_status.h"
#include "base/json.h"
#include "base/text.h"
#include "cli/box_flags.h"
#include "cli/commands.h"
#include "cli/server_flags.h"

namespace codebox::cli {
namespace {

constexpr const char kStatusHelp[] =
    R"(usage: codebox status [--server ADDR] [--token-file F] [--json]

Lists a codebox server's boxes and pools (`codebox serve`).

options:
  --json           print the server's answer (GET /v1/status) as JSON
)";

// What came from the server (images, errors, a peer's address) is made terminal-safe before it
// is printed.
std::string Safe(const std::string& text) { return base::TerminalSafe(text, 200); }

void PrintTable(const api::ServerStatus& status) {
  std::printf("codebox server %s, node %s, up %.0f s, %zu of %u boxes\n",
              Safe(status.version).c_str(), Safe(status.node).c_str(), status.uptime.count(),
              status.boxes.size(), status.max_boxes);
  if (!status.peers.empty()) {
    std::printf("\n%-24s %-24s %-5s %11s %-10s %s\n", "PEER NODE", "ADDRESS", "STATE", "BOXES",
                "DRIVERS", "NOTE");
    for (const api::PeerStatus& p : status.peers) {
      std::string boxes = std::to_string(p.boxes) + "/" + std::to_string(p.max_boxes);
      std::string drivers;
      for (const std::string& d : p.drivers) {
        drivers += (drivers.empty() ? "" : ",") + base::TerminalSafe(d, 16);
      }
      std::string note = p.full ? "full" : p.busy ? "busy" : "";
      if (!p.up) note = Safe(p.error);
      std::printf("%-24s %-24s %-5s %11s %-10s %s\n", Safe(p.node).c_str(), Safe(p.address).c_str(),
                  p.up ? "up" : "down", boxes.c_str(), drivers.c_str(), note.c_str());
    }
  }
  if (!status.pools.empty()) {
    std::printf("\n%-32s %7s %7s %9s %7s  %s\n", "POOL", "TARGET", "READY", "STARTING", "TAKEN",
                "LAST ERROR");
    for (const api::PoolStatus& p : status.pools) {
      std::printf("%-32s %7u %7u %9u %7llu  %s\n", Safe(p.spec).c_str(), p.target, p.ready,
                  p.starting, static_cast<unsigned long long>(p.taken), Safe(p.last_error).c_str());
    }
  }
  if (!status.boxes.empty()) {
    std::printf("\n%-20s %-12s %-8s %-5s %-5s %8s  %-20s  %s\n", "BOX", "IMAGE", "DRIVER", "STATE",
                "POOL", "REQUESTS", "CREATED", "NETWORK");
    for (const api::BoxRecord& b : status.boxes) {
      std::printf("%-20s %-12s %-8s %-5s %-5s %8llu  %-20s  %s\n", Safe(b.id).c_str(),
                  Safe(b.image).c_str(), Safe(b.info.driver).c_str(), b.state.c_str(),
                  b.from_pool ? "yes" : "no", static_cast<unsigned long long>(b.requests),
                  api::UtcSecondsText(b.created_at).c_str(), Safe(b.info.network).c_str());
    }
  }
}

}  // namespace

int StatusCommand(const std::vector<std::string>& args) {
  ServerFlags flags;
  bool as_json = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kStatusHelp, stdout);
      std::fputs(kServerFlagsHelp, stdout);
      return 0;
    } else if (a == "--json") {
      as_json = true;
    } else if (!flags.Take(args, &i)) {
      PrintError("status", InvalidArgument("unknown or incomplete option '" + a +
                                           "' (see codebox status --help)"));
      return kExitUsage;
    }
  }
  auto api = flags.Open();
  if (!api.ok()) return PrintError("status", api.status()), kExitUsage;
  auto answer = api->CallJson("GET", "/v1/status", "", std::chrono::seconds(10), "status");
  if (!answer.ok()) return PrintError("status", answer.status()), kExitCodeboxError;
  auto status = api::ServerStatusFromJson(*answer);
  if (!status.ok()) return PrintError("status", status.status()), kExitCodeboxError;
  // --json prints the answer as the server gave it, once it was checked.
  if (as_json) {
    std::printf("%s\n", base::JsonText(*answer, 2).c_str());
  } else {
    PrintTable(*status);
  }
  return 0;
}

}  // namespace codebox::cli
