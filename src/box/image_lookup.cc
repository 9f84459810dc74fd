#include "box/image_lookup.h"

#include <unistd.h>

#include <mutex>

#include "base/log.h"
#include "base/paths.h"
#include "image/oci_import.h"
#include "image/recipe.h"

namespace codebox::box {
namespace {

std::mutex g_first_use_mutex;
FirstUsePull g_first_use_pull;  // guarded by g_first_use_mutex

FirstUsePull CurrentFirstUsePull() {
  std::lock_guard<std::mutex> lock(g_first_use_mutex);
  return g_first_use_pull;
}

}  // namespace

void SetFirstUsePull(FirstUsePull pull) {
  std::lock_guard<std::mutex> lock(g_first_use_mutex);
  g_first_use_pull = std::move(pull);
}

StatusOr<image::ImageInfo> FindOrPullImage(const BoxOptions& options) {
  // The user's own store first, then the system store root built for everyone.
  const std::vector<base::ImageStore> stores = base::ImageStores(options.home);
  auto found = image::FindImage(stores, options.image);
  if (found.ok() || found.status().code() != StatusCode::kNotFound ||
      !image::IsOciImageName(options.image) || ::geteuid() != 0) {
    return found;
  }
  if (FirstUsePull pull = CurrentFirstUsePull()) return pull(options);
  CODEBOX_LOG(kWarn, "image " << options.image << " is not in " << stores.front().path
                              << "; pulling it (first use)");
  auto pulled =
      image::PullImage(stores.front().path, options.image, image::PullOptions{},
                       [](const std::string& line) { CODEBOX_LOG(kWarn, "image pull: " << line); });
  if (!pulled.ok()) {
    std::string message = "image '" + options.image + "' is not in the store";
    if (image::IsValidImageName(options.image)) {
      // A plain word: perhaps a recipe's name mistyped rather than a Docker Hub image.
      std::string names;
      for (const std::string& r : image::ListRecipes()) names += (names.empty() ? "" : ", ") + r;
      message += " and no recipe has that name (recipes: " + names + ")";
      return NotFound(message +
                      "; pulling it as an OCI image failed: " + pulled.status().message());
    }
    return Status(pulled.status().code(),
                  message + ", and pulling it failed: " + pulled.status().message());
  }
  return pulled;
}

}  // namespace codebox::box
