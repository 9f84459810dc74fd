// Where codebox keeps its state, and where its own helper binaries and image recipes are.
//
// Nothing here is a path of the build tree: helpers and recipes are found from where the
// code that asks is (the executable or shared object holding this library), in one of the
// layouts below, then in the install directories compiled in (CMAKE_INSTALL_PREFIX). See
// "Installed layout" in docs/design.md.
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

// Directory of the object this library was linked into: the executable for a program
// linked with codebox's static libraries, the extension module for Python.
std::string LibraryObjectDir();

// Every place FindHelperBinary looks for NAME, in order:
//   $CODEBOX_<NAME> (codebox-agent -> $CODEBOX_AGENT), $CODEBOX_LIBEXEC/NAME, then for D in
//   {LibraryObjectDir(), SelfExeDir()}: D/NAME (build tree: all executables in bin/),
//   D/codebox-libexec/NAME (a bundle: the Python package, or codebox_bundle() beside an
//   executable), D/../libexec/codebox/NAME (an installed prefix), D/../bin/NAME (the build
//   tree's python/ beside bin/), then, in a program built against an installed package with
//   find_package, that package's libexec dir wherever it was installed to or moved, and last
//   the install libexec dir compiled in.
std::vector<std::string> HelperBinaryCandidates(const std::string& name);

// The first executable candidate above; empty if there is none.
std::string FindHelperBinary(const std::string& name);

// "NAME not found (looked in: ...); install codebox, or set $CODEBOX_LIBEXEC to the folder
// holding NAME": what a caller says when FindHelperBinary came back empty.
std::string HelperNotFoundMessage(const std::string& name);

// The image recipes folder: $CODEBOX_IMAGES, else for D as above D/codebox-images (bundle),
// D/../share/codebox/images (installed prefix; the build tree links it to images/), else the
// find_package'd package's (as for helpers), else the install data dir compiled in. The compiled-in dir is returned when none exists.
std::string FindRecipeDir();

}  // namespace codebox::base

#endif  // CODEBOX_BASE_PATHS_H_
