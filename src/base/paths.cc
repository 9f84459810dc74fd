#include "base/paths.h"

#include <unistd.h>

#include <cctype>
#include <climits>
#include <cstdlib>

namespace codebox::base {

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

}  // namespace

std::string CodeboxHome(const std::string& override_home) {
  return ImageStores(override_home).front().path;
}

const char* StoreKindName(ImageStore::Kind kind) {
  switch (kind) {
    case ImageStore::Kind::kExplicit:
      return "explicit";
    case ImageStore::Kind::kUser:
      return "user";
    case ImageStore::Kind::kSystem:
      return "system";
  }
  return "?";
}

StoreEnv CurrentStoreEnv(const std::string& override_home) {
  StoreEnv env;
  env.override_home = override_home;
  env.codebox_home = Env("CODEBOX_HOME");
  env.xdg_data_home = Env("XDG_DATA_HOME");
  env.home = Env("HOME");
  env.root = ::geteuid() == 0;
  return env;
}

std::vector<ImageStore> ImageStoresFor(const StoreEnv& env) {
  using Kind = ImageStore::Kind;
  if (!env.override_home.empty()) return {{env.override_home, Kind::kExplicit}};
  if (!env.codebox_home.empty()) return {{env.codebox_home, Kind::kExplicit}};
  if (env.root) return {{kSystemStore, Kind::kSystem}};
  std::string own = !env.xdg_data_home.empty()
                        ? env.xdg_data_home + "/codebox"
                        : (env.home.empty() ? "/tmp" : env.home) + "/.local/share/codebox";
  return {{own, Kind::kUser}, {kSystemStore, Kind::kSystem}};
}

std::vector<ImageStore> ImageStores(const std::string& override_home) {
  return ImageStoresFor(CurrentStoreEnv(override_home));
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
