// The image store: recipes (images/NAME/recipe) -> Debian-built rootfs trees under
// $CODEBOX_HOME/images/<id>/, with a manifest. Builds are atomic: a tree appears under its
// final name only when complete.
#ifndef CODEBOX_IMAGE_STORE_H_
#define CODEBOX_IMAGE_STORE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "codebox/status.h"

namespace codebox::image {

struct Recipe {
  std::string name;                   // "python"
  std::string description;
  std::vector<std::string> packages;  // Debian packages installed on top of minbase
  std::string suite = "bookworm";
  std::string text;                   // the recipe file as read (hashed into the id)
};

struct ImageInfo {
  std::string name;
  std::string id;         // content-addressed: hash of the recipe text (+ builder version)
  std::string dir;        // $home/images/<id>
  std::string rootfs;     // $home/images/<id>/rootfs
  uint64_t size_bytes = 0;
  std::string built_at;   // ISO 8601
};

// Directory holding recipes: base::FindRecipeDir() ($CODEBOX_IMAGES, else where codebox is
// installed; the build tree links its share/codebox/images to the source images/).
std::string RecipeDir();
StatusOr<Recipe> LoadRecipe(const std::string& name);
std::vector<std::string> ListRecipes();

// The built image named `name` (its current recipe's id). kNotFound says how to build it:
// "image 'python' is not built; run: codebox image build python".
StatusOr<ImageInfo> FindImage(const std::string& home, const std::string& name);
std::vector<ImageInfo> ListImages(const std::string& home);
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
