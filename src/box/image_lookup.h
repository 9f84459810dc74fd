// The image a box asks for: a recipe's build, or an OCI image, pulled on first use.
#ifndef CODEBOX_BOX_IMAGE_LOOKUP_H_
#define CODEBOX_BOX_IMAGE_LOOKUP_H_

#include <functional>

#include "codebox/options.h"
#include "codebox/status.h"
#include "image/store.h"

namespace codebox::box {

// image::FindImage over the stores options.home gives; an OCI reference that no store has is
// pulled into the first store (root only: a non-root user gets the `sudo codebox image pull`
// hint), with its progress on the log (warn level: the default, so a user sees why the first
// box takes a while).
StatusOr<image::ImageInfo> FindOrPullImage(const BoxOptions& options);

// How FindOrPullImage pulls an OCI image no store has, as root, in this process. Unset (the CLI,
// the library): image::PullImage with default options. `codebox serve` sets its own, which
// pulls only from the registries its operator allows, through a confined network
// (server/image_pulls.h). The result is returned as it is.
using FirstUsePull = std::function<StatusOr<image::ImageInfo>(const BoxOptions& options)>;
void SetFirstUsePull(FirstUsePull pull);

}  // namespace codebox::box

#endif  // CODEBOX_BOX_IMAGE_LOOKUP_H_
