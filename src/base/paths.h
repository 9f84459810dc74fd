// Where codebox keeps its state, and where its own binaries are.
#ifndef CODEBOX_BASE_PATHS_H_
#define CODEBOX_BASE_PATHS_H_

#include <string>
#include <vector>

namespace codebox::base {

// The store root: `override_home` if non-empty, else $CODEBOX_HOME, else /var/lib/codebox
// for root, else $XDG_DATA_HOME/codebox or ~/.local/share/codebox. It is the first of
// ImageStores() and the only store codebox writes (builds, kernels, run dirs).
std::string CodeboxHome(const std::string& override_home = "");

// The system store: root builds images here, and every user's boxes find them.
inline constexpr char kSystemStore[] = "/var/lib/codebox";

struct ImageStore {
  enum class Kind {
    kExplicit,  // BoxOptions::home or $CODEBOX_HOME: the only store searched
    kUser,      // a non-root user's own store, searched first
    kSystem,    // /var/lib/codebox (written by root only)
  };
  std::string path;
  Kind kind = Kind::kUser;
};
const char* StoreKindName(ImageStore::Kind kind);  // "explicit", "user", "system"

// What the store search depends on, so it can be decided (and tested) without the process's
// environment.
struct StoreEnv {
  std::string override_home;  // BoxOptions::home
  std::string codebox_home;   // $CODEBOX_HOME
  std::string xdg_data_home;  // $XDG_DATA_HOME
  std::string home;           // $HOME
  bool root = false;          // effective uid 0
};
StoreEnv CurrentStoreEnv(const std::string& override_home = "");

// Where images are looked up, in order. An explicit home is the only store; root has the
// system store; any other user has their own store first, then the system store (read-only
// for them).
std::vector<ImageStore> ImageStoresFor(const StoreEnv& env);
std::vector<ImageStore> ImageStores(const std::string& override_home = "");

// Directory holding the running executable (readlink /proc/self/exe).
std::string SelfExeDir();

// Path of a codebox helper binary (codebox-agent, ...): the variable named after it if set
// ($CODEBOX_AGENT for codebox-agent), else $CODEBOX_LIBEXEC/NAME if set, else
// beside the running executable, else ../bin/NAME or ../libexec/codebox/NAME from it.
// Empty if not found.
std::string FindHelperBinary(const std::string& name);

}  // namespace codebox::base

#endif  // CODEBOX_BASE_PATHS_H_
