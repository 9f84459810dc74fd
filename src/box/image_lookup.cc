#include "box/image_lookup.h"

#include <unistd.h>

#include "base/log.h"
#include "base/paths.h"
#include "image/oci_import.h"

namespace codebox::box {

StatusOr<image::ImageInfo> FindOrPullImage(const BoxOptions& options) {
  // The user's own store first, then the system store root built for everyone.
  const std::vector<base::ImageStore> stores = base::ImageStores(options.home);
  auto found = image::FindImage(stores, options.image);
  if (found.ok() || found.status().code() != StatusCode::kNotFound ||
      !image::IsOciImageName(options.image) || ::geteuid() != 0) {
    return found;
  }
  CODEBOX_LOG(kWarn, "image " << options.image << " is not in " << stores.front().path
                              << "; pulling it (first use)");
  auto pulled = image::PullImage(stores.front().path, options.image, image::PullOptions{},
                                 [](const std::string& line) {
                                   CODEBOX_LOG(kWarn, "image pull: " << line);
                                 });
  if (!pulled.ok()) {
    return pulled.status().WithContext("image " + options.image + " is not in the store, and "
                                       "pulling it failed");
  }
  return pulled;
}

}  // namespace codebox::box
