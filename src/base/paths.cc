#include "base/paths.h"

#include <unistd.h>

#include <cctype>
#include <climits>
#include <cstdlib>

namespace codebox::base {

std::string CodeboxHome(const std::string& override_home) {
  if (!override_home.empty()) return override_home;
  if (const char* v = std::getenv("CODEBOX_HOME"); v != nullptr && *v != '\0') return v;
  if (::geteuid() == 0) return "/var/lib/codebox";
  if (const char* x = std::getenv("XDG_DATA_HOME"); x != nullptr && *x != '\0') {
    return std::string(x) + "/codebox";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "/tmp") + "/.local/share/codebox";
}

std::string SelfExeDir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

std::string FindHelperBinary(const std::string& name) {
  // An exact override per binary: codebox-agent -> $CODEBOX_AGENT. The sanitizer build uses
  // it to put the release (static) agent into boxes, where no sanitizer runtime exists.
  std::string var;
  for (char c : name) var += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (const char* v = std::getenv(var.c_str()); v != nullptr && *v != '\0') return v;
  std::string candidates[5];
  int count = 0;
  if (const char* v = std::getenv("CODEBOX_LIBEXEC"); v != nullptr && *v != '\0') {
    candidates[count++] = std::string(v) + "/" + name;
  }
  std::string dir = SelfExeDir();
  candidates[count++] = dir + "/" + name;
  candidates[count++] = dir + "/../bin/" + name;
  candidates[count++] = dir + "/../libexec/codebox/" + name;
#ifdef CODEBOX_BUILD_BIN_DIR
  // Callers whose executable is not ours (python3 loading the module) find the build tree.
  candidates[count++] = std::string(CODEBOX_BUILD_BIN_DIR) + "/" + name;
#endif
  for (int i = 0; i < count; ++i) {
    if (::access(candidates[i].c_str(), X_OK) == 0) return candidates[i];
  }
  return "";
}

}  // namespace codebox::base
