// The image disk: an image tree turned into an erofs file once, attached read-only over
// virtio-blk. Many boxes share one file.
#ifndef CODEBOX_VM_DISK_H_
#define CODEBOX_VM_DISK_H_

#include <string>

#include "codebox/status.h"

namespace codebox::vm {

// `<image_tree>.erofs` (e.g. <home>/images/<id>/rootfs.erofs) when that directory is
// writable, else <home>/disks/<hash of the tree path>.erofs. Rebuilt when the tree's top
// directory is newer than the disk (image store trees never change; hand-made ones might).
StatusOr<std::string> EnsureErofsDisk(const std::string& home, const std::string& image_tree);

}  // namespace codebox::vm

#endif  // CODEBOX_VM_DISK_H_
