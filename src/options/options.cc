#include "codebox/options.h"

#include "base/json.h"

namespace codebox {

std::string_view DriverKindName(DriverKind kind) {
  switch (kind) {
    case DriverKind::kAuto: return "auto";
    case DriverKind::kJail: return "jail";
    case DriverKind::kVm: return "vm";
  }
  return "unknown";
}

StatusOr<DriverKind> ParseDriverKind(std::string_view name) {
  if (name == "auto") return DriverKind::kAuto;
  if (name == "jail") return DriverKind::kJail;
  if (name == "vm") return DriverKind::kVm;
  return InvalidArgument("unknown driver '" + std::string(name) + "' (choose auto, jail or vm)");
}

Status ValidateEnvironment(const std::map<std::string, std::string>& env) {
  size_t total = 0;
  for (const auto& [key, value] : env) {
    if (key.empty() || key.find('=') != std::string::npos || key.find('\0') != std::string::npos) {
      return InvalidArgument("environment variable name '" + base::Excerpt(key) + "' is not valid");
    }
    if (value.find('\0') != std::string::npos) {
      return InvalidArgument("environment variable " + base::Excerpt(key) + " contains a NUL byte");
    }
    size_t entry = key.size() + 1 + value.size() + 1;
    if (entry > kMaxArgBytes) {
      return InvalidArgument("environment variable " + base::Excerpt(key) + " is " +
                             std::to_string(entry) +
                             " bytes; one variable may take at most " +
                             std::to_string(kMaxArgBytes >> 10) +
                             " KiB (pass large data as a file, or on stdin)");
    }
    total += entry;
  }
  if (total > kMaxEnvironmentBytes) {
    return InvalidArgument("the environment is " + std::to_string(total) +
                           " bytes; all variables together may take at most " +
                           std::to_string(kMaxEnvironmentBytes >> 10) +
                           " KiB (pass large data as a file, or on stdin)");
  }
  return Status::Ok();
}

Status ValidateTimeout(std::chrono::milliseconds timeout, std::string_view what) {
  if (timeout == kNoTimeout || timeout.count() >= 1) return Status::Ok();
  return InvalidArgument(std::string(what) + " must be at least 1 ms, got " +
                         std::to_string(timeout.count()) +
                         " ms; for no limit ask for none explicitly (kNoTimeout, --timeout none, "
                         "timeout=None)");
}

Status ValidateArgv(const std::vector<std::string>& argv) {
  if (argv.empty()) return InvalidArgument("exec: argv is empty");
  for (size_t i = 0; i < argv.size(); ++i) {
    size_t nul = argv[i].find('\0');
    if (nul != std::string::npos) {
      return InvalidArgument("exec: argument " + std::to_string(i) + " contains a NUL byte at offset " +
                             std::to_string(nul) +
                             " (a program's arguments and source code cannot hold NUL bytes)");
    }
    if (argv[i].size() >= kMaxArgBytes) {
      return InvalidArgument("exec: argument " + std::to_string(i) + " is " +
                             std::to_string(argv[i].size()) + " bytes; Linux allows at most " +
                             std::to_string(kMaxArgBytes >> 10) +
                             " KiB per argument (pass large data on stdin or as a file)");
    }
  }
  return Status::Ok();
}

}  // namespace codebox
