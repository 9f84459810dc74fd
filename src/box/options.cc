#include <cctype>

#include "codebox/options.h"

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

static bool IsImageName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  }
  return name[0] != '.';
}

Status BoxOptions::Validate() const {
  if (!IsImageName(image)) {
    return InvalidArgument("image name '" + image + "' is not valid (letters, digits, '-', '_', '.')");
  }
  if (!(cpus > 0 && cpus <= 256)) return InvalidArgument("cpus must be in (0, 256]");
  if (memory_mib < 32) return InvalidArgument("memory must be at least 32 MiB");
  if (memory_mib > (1u << 20)) return InvalidArgument("memory must be at most 1 TiB");
  if (disk_mib < 1) return InvalidArgument("disk must be at least 1 MiB");
  if (max_processes < 1) return InvalidArgument("max_processes must be at least 1");
  if (max_open_files < 16) return InvalidArgument("max_open_files must be at least 16");
  if (exec_timeout.count() < 0) return InvalidArgument("exec timeout must not be negative");
  if (box_timeout.count() < 0) return InvalidArgument("box timeout must not be negative");
  if (output_limit_bytes < 1) return InvalidArgument("output limit must be at least 1 byte");
  if (workdir.empty() || workdir[0] != '/') {
    return InvalidArgument("workdir must be an absolute path inside the box, got '" + workdir + "'");
  }
  return ValidateEnvironment(env);
}

Status ValidateEnvironment(const std::map<std::string, std::string>& env) {
  for (const auto& [key, value] : env) {
    if (key.empty() || key.find('=') != std::string::npos || key.find('\0') != std::string::npos) {
      return InvalidArgument("environment variable name '" + key + "' is not valid");
    }
    if (value.find('\0') != std::string::npos) {
      return InvalidArgument("environment variable " + key + " contains a NUL byte");
    }
  }
  return Status::Ok();
}

}  // namespace codebox
