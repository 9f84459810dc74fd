// `codebox status`: a codebox server's boxes and pools (GET /v1/status), as a table or JSON.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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

using nlohmann::json;

// Box-derived text (images, errors) is made terminal-safe before it is printed.
std::string Text(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return "-";
  std::string s = it->is_string() ? it->get<std::string>() : it->dump();
  return base::TerminalSafe(s, 200);
}

// The array at `key`, or an empty one (a malformed answer prints as nothing, never throws).
json Array(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : json::array();
}

void PrintTable(const json& status) {
  auto uptime = status.find("uptime_s");
  double up = uptime != status.end() && uptime->is_number() ? uptime->get<double>() : 0;
  std::printf("codebox server %s, node %s, up %.0f s, %zu of %s boxes\n",
              Text(status, "version").c_str(), Text(status, "node").c_str(), up,
              Array(status, "boxes").size(), Text(status, "max_boxes").c_str());
  const json peers = Array(status, "peers");
  if (!peers.empty()) {
    std::printf("\n%-24s %-24s %-5s %11s %-10s %s\n", "PEER NODE", "ADDRESS", "STATE", "BOXES",
                "DRIVERS", "NOTE");
    for (const json& p : peers) {
      std::string boxes = Text(p, "boxes") + "/" + Text(p, "max_boxes");
      std::string drivers;
      for (const json& d : Array(p, "drivers")) {
        drivers += (drivers.empty() ? "" : ",") +
                   base::TerminalSafe(d.is_string() ? d.get<std::string>() : "", 16);
      }
      std::string note = Text(p, "full") == "true"   ? "full"
                         : Text(p, "busy") == "true" ? "busy"
                                                     : "";
      if (Text(p, "state") == "down") note = Text(p, "error");
      std::printf("%-24s %-24s %-5s %11s %-10s %s\n", Text(p, "node").c_str(),
                  Text(p, "address").c_str(), Text(p, "state").c_str(), boxes.c_str(),
                  drivers.c_str(), note.c_str());
    }
  }
  const json pools = Array(status, "pools");
  if (!pools.empty()) {
    std::printf("\n%-32s %7s %7s %9s %7s  %s\n", "POOL", "TARGET", "READY", "STARTING", "TAKEN",
                "LAST ERROR");
    for (const json& p : pools) {
      std::printf("%-32s %7s %7s %9s %7s  %s\n", Text(p, "spec").c_str(), Text(p, "target").c_str(),
                  Text(p, "ready").c_str(), Text(p, "starting").c_str(), Text(p, "taken").c_str(),
                  Text(p, "last_error").c_str());
    }
  }
  const json boxes = Array(status, "boxes");
  if (!boxes.empty()) {
    std::printf("\n%-20s %-12s %-8s %-5s %-5s %8s  %-20s  %s\n", "BOX", "IMAGE", "DRIVER", "STATE",
                "POOL", "REQUESTS", "CREATED", "NETWORK");
    for (const json& b : boxes) {
      std::printf("%-20s %-12s %-8s %-5s %-5s %8s  %-20s  %s\n", Text(b, "id").c_str(),
                  Text(b, "image").c_str(), Text(b, "driver").c_str(), Text(b, "state").c_str(),
                  Text(b, "from_pool") == "true" ? "yes" : "no", Text(b, "requests").c_str(),
                  Text(b, "created_at").c_str(), Text(b, "network").c_str());
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
  const json& status = *answer;
  if (as_json) {
    std::printf("%s\n", status.dump(2, ' ', false, json::error_handler_t::replace).c_str());
  } else {
    PrintTable(status);
  }
  return 0;
}

}  // namespace codebox::cli
