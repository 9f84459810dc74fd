#include "base/paths.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <climits>
#include <cstdlib>

// Install directories from CMake (GNUInstallDirs); never a build-tree path.
#ifndef CODEBOX_INSTALL_LIBEXEC_DIR
#define CODEBOX_INSTALL_LIBEXEC_DIR "/usr/local/libexec/codebox"
#endif
#ifndef CODEBOX_INSTALL_IMAGES_DIR
#define CODEBOX_INSTALL_IMAGES_DIR "/usr/local/share/codebox/images"
#endif

// Where an installed package of codebox is now, as the program that links it from there was
// told at its configure time: codebox-config.cmake compiles a definition of these into each
// program linking codebox::box (cmake/codebox-config.cmake.in). Weak and undefined everywhere
// else (the CLI, the Python module, the build tree), where they are null.
extern "C" {
__attribute__((weak)) const char* codebox_installed_libexec_dir();
__attribute__((weak)) const char* codebox_installed_images_dir();
}

namespace codebox::base {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// LibraryObjectDir() then SelfExeDir(), without repeating one that is the same.
std::vector<std::string> SearchDirs() {
  std::vector<std::string> dirs{LibraryObjectDir()};
  std::string exe = SelfExeDir();
  if (exe != dirs[0]) dirs.push_back(exe);
  return dirs;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
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
  return DirName(std::string(buf, static_cast<size_t>(n)));
}

std::string LibraryObjectDir() {
  Dl_info info;
  struct link_map* map = nullptr;
  // The link map names the object by the path it was loaded from; the main program's name is
  // empty, and then /proc/self/exe says where it is.
  if (::dladdr1(reinterpret_cast<void*>(&LibraryObjectDir), &info, reinterpret_cast<void**>(&map),
                RTLD_DL_LINKMAP) == 0 ||
      map == nullptr || map->l_name == nullptr || map->l_name[0] == '\0') {
    return SelfExeDir();
  }
  char resolved[PATH_MAX];
  if (::realpath(map->l_name, resolved) == nullptr) return SelfExeDir();
  return DirName(resolved);
}

std::vector<std::string> HelperBinaryCandidates(const std::string& name) {
  std::vector<std::string> out;
  // An exact override per binary: codebox-agent -> $CODEBOX_AGENT. The sanitizer build uses
  // it to put the release (static) agent into boxes, where no sanitizer runtime exists.
  std::string var;
  for (char c : name) {
    var += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  if (std::string v = Env(var.c_str()); !v.empty()) out.push_back(v);
  if (std::string v = Env("CODEBOX_LIBEXEC"); !v.empty()) out.push_back(v + "/" + name);
  for (const std::string& dir : SearchDirs()) {
    out.push_back(dir + "/" + name);
    out.push_back(dir + "/codebox-libexec/" + name);
    out.push_back(dir + "/../libexec/codebox/" + name);
    out.push_back(dir + "/../bin/" + name);
  }
  if (codebox_installed_libexec_dir != nullptr) {
    out.push_back(std::string(codebox_installed_libexec_dir()) + "/" + name);
  }
  out.push_back(std::string(CODEBOX_INSTALL_LIBEXEC_DIR) + "/" + name);
  return out;
}

std::string FindHelperBinary(const std::string& name) {
  for (const std::string& path : HelperBinaryCandidates(name)) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(path.c_str(), X_OK) == 0) {
      return path;
    }
  }
  return "";
}

std::string HelperNotFoundMessage(const std::string& name) {
  std::string places;
  for (const std::string& path : HelperBinaryCandidates(name)) {
    places += (places.empty() ? "" : ", ") + path;
  }
  return name + " not found (looked in: " + places + "); install codebox (cmake --install, " +
         "pip install, or the .deb), or set $CODEBOX_LIBEXEC to the folder holding " + name;
}

std::string FindRecipeDir() {
  if (std::string v = Env("CODEBOX_IMAGES"); !v.empty()) return v;
  for (const std::string& dir : SearchDirs()) {
    for (const std::string& candidate :
         {dir + "/codebox-images", dir + "/../share/codebox/images"}) {
      if (IsDirectory(candidate)) return candidate;
    }
  }
  if (codebox_installed_images_dir != nullptr && IsDirectory(codebox_installed_images_dir())) {
    return codebox_installed_images_dir();
  }
  return CODEBOX_INSTALL_IMAGES_DIR;
}

}  // namespace codebox::base
