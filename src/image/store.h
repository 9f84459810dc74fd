// The image store: recipes (images/NAME/recipe) -> Debian-built rootfs trees under
// $CODEBOX_HOME/images/<id>/, with a manifest. Builds are atomic: a tree appears under its
// final name only when complete.
#ifndef CODEBOX_IMAGE_STORE_H_
#define CODEBOX_IMAGE_STORE_H_

#include <cstdint>
#include <functional>
#include <string>
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

// Directory holding recipes: $CODEBOX_IMAGES, else the source tree's images/ (compiled in),
// else /usr/share/codebox/images.
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

}  // namespace codebox::image

#endif  // CODEBOX_IMAGE_STORE_H_
