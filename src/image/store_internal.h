// Store layout shared by store.cc (lookups) and builder.cc (builds):
//   $home/images/<id>/rootfs          the tree
//   $home/images/<id>/manifest.json   what it is (written last, inside the temp dir)
//   $home/images/by-name/<name>       symlink "../<id>" to the newest build of a name
//   $home/images/.tmp-<id>-<pid>/     a build in progress (or a dead one, to clean)
#ifndef CODEBOX_IMAGE_STORE_INTERNAL_H_
#define CODEBOX_IMAGE_STORE_INTERNAL_H_

#include <string>

#include "codebox/status.h"
#include "image/store.h"

namespace codebox::image {

inline std::string ImagesDir(const std::string& home) { return home + "/images"; }
inline std::string ByNameDir(const std::string& home) { return home + "/images/by-name"; }

Status WriteManifest(const std::string& path, const BuildRecord& record,
                     const std::string& recipe_text);
// Points images/by-name/<name> at <id>, atomically (symlink to a temp name, rename over).
Status SetNamePointer(const std::string& home, const std::string& name, const std::string& id);

}  // namespace codebox::image

#endif  // CODEBOX_IMAGE_STORE_INTERNAL_H_
