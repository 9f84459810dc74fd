// The image store: recipes (images/NAME/recipe) -> Debian-built rootfs trees under
// $CODEBOX_HOME/images/<id>/, with a manifest. Builds are atomic: a tree appears under its
// final name only when complete.
#ifndef CODEBOX_IMAGE_STORE_H_
#define CODEBOX_IMAGE_STORE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/paths.h"
#include "codebox/status.h"

namespace codebox::image {

struct Recipe {
  std::string name;  // "python"
  std::string description;
  std::vector<std::string> packages;  // Debian packages installed on top of minbase
  std::string suite = "bookworm";
  std::string text;  // the recipe file as read (hashed into the id)
};

// How an OCI image's config says its processes run (all empty for recipe images). Every
// field came from a hostile file and was checked on import (src/image/oci_layout.cc).
struct ImageConfig {
  std::vector<std::string> env;  // "KEY=VALUE" as the image lists them (PATH among them)
  std::string working_dir;       // absolute and clean, or "" (the image names none)
  std::string user;              // as the image wrote it ("app", "1000:1000"), or ""
  // `user` resolved against the image's /etc/passwd and /etc/group; nullopt: root (none given,
  // or "root"/"0").
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::string home;  // the user's home directory from /etc/passwd, or ""
  // working_dir holds files in the image: a box keeps them visible (read-only) instead of
  // putting an empty scratch directory over them.
  bool working_dir_has_files = false;
};

struct ImageInfo {
  std::string name;    // a recipe's name, or an OCI image's canonical reference
  std::string id;      // content-addressed: hash of the recipe text (+ builder version)
  std::string dir;     // $home/images/<id>
  std::string rootfs;  // $home/images/<id>/rootfs
  uint64_t size_bytes = 0;
  std::string built_at;  // ISO 8601
  std::string store;     // $home: the store it was found in
  base::ImageStore::Kind store_kind = base::ImageStore::Kind::kExplicit;
  // OCI images only: where it came from and what it says about running.
  std::string source;     // "recipe", or "oci": pulled or imported
  std::string reference;  // what was pulled ("docker.io/library/python:3.12-slim") or imported
  std::string digest;     // the image manifest's digest, "sha256:<64 hex>"
  ImageConfig config;
};

// Directory holding recipes: base::FindRecipeDir() ($CODEBOX_IMAGES, else where codebox is
// installed; the build tree links its share/codebox/images to the source images/).
std::string RecipeDir();
StatusOr<Recipe> LoadRecipe(const std::string& name);
std::vector<std::string> ListRecipes();

// The built image named `name` (its current recipe's id), from the first of `stores` that
// has it (base::ImageStores gives the search order). kNotFound says how to build it with a
// command that works for this user (MissingImageHint); kPermissionDenied when a store has
// it but this user cannot read it (UnreadableImageHint).
StatusOr<ImageInfo> FindImage(const std::vector<base::ImageStore>& stores, const std::string& name);
// The same in the one store `home` (as an explicit home).
StatusOr<ImageInfo> FindImage(const std::string& home, const std::string& name);
std::vector<ImageInfo> ListImages(const std::string& home);
// Every build in every store, each with the store it is in, in search order.
std::vector<ImageInfo> ListImages(const std::vector<base::ImageStore>& stores);

// The message for an image that no store has, with the command that builds it where this
// user's boxes look. Building needs root (debootstrap makes device nodes and root-owned
// files), so a non-root user is told `sudo codebox image build NAME`, which puts it in the
// system store, which they search.
std::string MissingImageHint(const std::string& name, const std::vector<base::ImageStore>& stores,
                             bool root);
// The command (with a short why) that builds `name` where this user's boxes look.
std::string BuildCommandHint(const std::string& name, const std::vector<base::ImageStore>& stores,
                             bool root);
// The message for an image whose files `path` (in store `store`) this user cannot read.
std::string UnreadableImageHint(const std::string& name, const std::string& store,
                                const std::string& image_dir, const std::string& path, int err);
Status RemoveImage(const std::string& home, const std::string& name);

// Builds (or skips, when already built) the image for `recipe`. Progress lines go to
// `progress` (e.g. "debootstrap: 40%", "installing numpy ...").
StatusOr<ImageInfo> BuildImage(const std::string& home, const Recipe& recipe,
                               const std::function<void(const std::string&)>& progress);

// The content-addressed id of `recipe`: the first 16 hex digits of SHA-256 over the builder
// version and the recipe text. Same text, same builder -> same id.
std::string ImageId(const Recipe& recipe);

// Knobs for BuildImage; the defaults are what `codebox image build` uses.
struct BuildOptions {
  bool force = false;        // rebuild even when an image with this id is already built
  std::string mirror;        // Debian archive URI; empty: $CODEBOX_MIRROR, else the apt config
  std::string debootstrap;   // program; empty: $CODEBOX_DEBOOTSTRAP, else "debootstrap"
  std::string chroot;        // program; empty: $CODEBOX_CHROOT, else "chroot"
  bool require_root = true;  // tests running fake programs clear this
};
StatusOr<ImageInfo> BuildImage(const std::string& home, const Recipe& recipe,
                               const std::function<void(const std::string&)>& progress,
                               const BuildOptions& options);

// Everything the manifest records beyond ImageInfo (what was installed, from where, how long
// the build took).
struct BuildRecord {
  ImageInfo info;
  std::string description;
  std::string mirror;
  double build_seconds = 0;
  std::vector<std::pair<std::string, std::string>> packages;  // (package, version), sorted
};
StatusOr<BuildRecord> ReadManifest(const std::string& image_dir);

}  // namespace codebox::image

#endif  // CODEBOX_IMAGE_STORE_H_
