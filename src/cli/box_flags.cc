#include "cli/box_flags.h"

#include <cstdio>
#include <cstdlib>

#include "base/text.h"

namespace codebox::cli {

const char kBoxFlagsHelp[] = R"(box options:
  --image NAME         image to run (default python; build with `codebox image build NAME`)
  --driver D           auto (default), jail or vm
  --allow-emulation    vm driver: allow QEMU tcg emulation where there is no kvm (slow)
  --timeout T          wall-clock limit per exec: seconds, or 500ms, 2m, or none (default 30)
  --box-timeout T      wall-clock limit for the whole box, or none (default none)
  --memory SIZE        memory limit, MiB or with M/G suffix (default 512)
  --cpus N             CPU share, may be fractional (default 1)
  --disk SIZE          writable scratch space (default 256M)
  --pids N             process limit (default 128)
  --env K=V            environment variable in the box (repeatable; nothing of the host's
                       environment enters the box)
  --workdir DIR        working directory in the box (default /work)
)";

static StatusOr<double> ParseNumber(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end == nullptr || *end != '\0' || !(v >= 0)) {
    return InvalidArgument("'" + text + "' is not a non-negative number");
  }
  return v;
}

StatusOr<uint64_t> ParseMebibytes(const std::string& text) {
  std::string number = text;
  double scale = 1;
  if (!number.empty()) {
    char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(number.back())));
    if (unit == 'M' || unit == 'G' || unit == 'K') {
      number.pop_back();
      scale = unit == 'G' ? 1024 : unit == 'K' ? 1.0 / 1024 : 1;
    }
  }
  auto v = ParseNumber(number);
  if (!v.ok()) return InvalidArgument("'" + text + "' is not a size (e.g. 512, 512M, 2G)");
  return static_cast<uint64_t>(*v * scale);
}

StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& text) {
  std::string number = text;
  double scale = 1000;
  if (number.size() > 2 && number.substr(number.size() - 2) == "ms") {
    number.resize(number.size() - 2);
    scale = 1;
  } else if (!number.empty() && (number.back() == 's' || number.back() == 'm')) {
    scale = number.back() == 'm' ? 60'000 : 1000;
    number.pop_back();
  }
  auto v = ParseNumber(number);
  if (!v.ok()) return InvalidArgument("'" + text + "' is not a duration (e.g. 30, 1.5, 500ms, 2m)");
  // Below 1 ms it would truncate to 0, which must never read as "no limit".
  if (*v * scale < 1) {
    return InvalidArgument("'" + text + "' is under 1 ms; a duration is at least 1ms");
  }
  if (*v * scale > 1e12) return InvalidArgument("'" + text + "' is too long a duration");
  return std::chrono::milliseconds(static_cast<int64_t>(*v * scale));
}

StatusOr<std::chrono::milliseconds> ParseTimeout(const std::string& text) {
  if (text == "none") return kNoTimeout;
  auto d = ParseDuration(text);
  if (!d.ok()) return InvalidArgument(d.status().message() + " (or none for no limit)");
  return d;
}

static Status ApplyBoxFlag(const std::string& flag, const std::string& value, BoxOptions* options) {
  if (flag == "--image") {
    options->image = value;
  } else if (flag == "--driver") {
    ASSIGN_OR_RETURN(options->driver, ParseDriverKind(value));
  } else if (flag == "--timeout") {
    ASSIGN_OR_RETURN(options->exec_timeout, ParseTimeout(value));
  } else if (flag == "--box-timeout") {
    ASSIGN_OR_RETURN(options->box_timeout, ParseTimeout(value));
  } else if (flag == "--memory") {
    ASSIGN_OR_RETURN(options->memory_mib, ParseMebibytes(value));
  } else if (flag == "--disk") {
    ASSIGN_OR_RETURN(options->disk_mib, ParseMebibytes(value));
  } else if (flag == "--cpus") {
    ASSIGN_OR_RETURN(options->cpus, ParseNumber(value));
  } else if (flag == "--pids") {
    ASSIGN_OR_RETURN(double pids, ParseNumber(value));
    options->max_processes = static_cast<uint32_t>(pids);
  } else if (flag == "--env") {
    size_t eq = value.find('=');
    if (eq == std::string::npos || eq == 0) return InvalidArgument("wants K=V, got '" + value + "'");
    options->env[value.substr(0, eq)] = value.substr(eq + 1);
  } else if (flag == "--workdir") {
    options->workdir = value;
  }
  return Status::Ok();
}

StatusOr<bool> ParseBoxFlag(const std::vector<std::string>& args, size_t* i, BoxOptions* options) {
  const std::string& flag = args[*i];
  if (flag == "--allow-emulation") {
    options->allow_emulation = true;
    return true;
  }
  static const char* const kValued[] = {"--image", "--driver", "--timeout", "--box-timeout",
                                        "--memory", "--cpus", "--disk", "--pids", "--env",
                                        "--workdir"};
  bool known = false;
  for (const char* name : kValued) known = known || flag == name;
  if (!known) return false;
  if (*i + 1 >= args.size()) return InvalidArgument(flag + " needs a value");
  const std::string& value = args[++*i];
  Status st = ApplyBoxFlag(flag, value, options);
  if (!st.ok()) return st.WithContext(flag);
  return true;
}

void PrintError(const std::string& command, const Status& status) {
  // Error texts may quote the box (names, agent messages, the guest console).
  std::string message = base::TerminalSafe(status.message());
  std::fprintf(stderr, "codebox %s: %s\n", command.c_str(), message.c_str());
}

}  // namespace codebox::cli
