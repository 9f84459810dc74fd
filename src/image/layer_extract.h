// Applies OCI image layers (tar, gzip- or zstd-compressed or not) onto a rootfs tree, treating
// every byte of a layer as hostile: nothing is ever written outside the tree, whatever the
// names, symlinks and hardlinks in the layer say, and the size limits hold while extracting.
#ifndef CODEBOX_IMAGE_LAYER_EXTRACT_H_
#define CODEBOX_IMAGE_LAYER_EXTRACT_H_

#include <cstdint>
#include <string>

#include "codebox/status.h"

namespace codebox::image {

struct ExtractLimits {
  uint64_t max_bytes = 16ull << 30;  // file data written, all layers together
  uint64_t max_entries = 2'000'000;  // tar entries, all layers together
  bool keep_setuid = false;          // false: setuid and setgid bits are cleared
};

// What the layers held, summed over every ApplyLayer call that is given the same struct.
struct ExtractStats {
  uint64_t bytes = 0;            // file data and symlink targets (a sparse file's holes too)
  uint64_t entries = 0;          // tar entries read (whiteouts included)
  uint64_t whiteouts = 0;        // .wh.NAME and .wh..wh..opq entries applied
  uint64_t dropped_devices = 0;  // character and block devices skipped
  uint64_t cleared_setuid = 0;   // files whose setuid/setgid bits were cleared
};

// Extracts the layer file `layer_path` onto the tree at `rootfs` (a directory, normally
// created empty by the caller for the first layer), with OCI layer semantics:
//  * later layers overwrite earlier entries (the old entry is removed first, a directory with
//    its tree, so nothing is written through an existing file or link); a directory entry
//    over an existing directory keeps its contents and takes the new mode/owner;
//  * whiteouts: ".wh.NAME" removes NAME from the lower layers; ".wh..wh..opq" in a directory
//    removes everything the lower layers put there, wherever the marker is in the tar; what
//    this layer wrote itself stays; neither is itself written, nor is aufs' ".wh..wh.*";
//  * ownership (uid/gid from the tar header) and modes are applied (as root), mtimes kept
//    for all but directories; xattrs are ignored (security.capability included);
//  * regular files, directories, symlinks (targets stored as given: they resolve in the box,
//    whose root is the tree), hardlinks, FIFOs are written; char/block devices are dropped
//    (what a lower layer had at the name still goes); sockets are skipped;
//  * setuid/setgid are cleared on everything but directories unless limits.keep_setuid
//    (a directory's setgid only passes its group on, and is kept);
//  * the root entry ("./") is skipped: the root keeps the mode and owner the caller gave it;
//  * missing parent directories are made, mode 0755, owned by the extracting user (root).
// Parent directories are resolved inside the tree, as the box would resolve them
// (openat2 RESOLVE_IN_ROOT): a symlink "etc -> /etc" or "up -> ../../.." in a layer leads to
// the tree's own /etc or root, never the host's; the last component is never followed. A
// parent that is a symlink leading nowhere in the tree (or in a loop) is an error, not made.
// Refused, each with an error that names the layer and the entry ("layer 2 of 3
// (sha256:ab..): entry '../../etc/x': ..."): names with a ".." component, hardlinks whose
// target has one or is not a file or symlink already in the tree, names over PATH_MAX (a
// NUL cannot reach us: libarchive ends a name at it), an unreadable or truncated archive
// (kInvalidArgument), and a layer that takes the totals past `limits` (kLimitExceeded;
// counted while writing, not trusted from the headers; a sparse file counts at its size).
// On error the tree is left partly written: the caller removes it. A leading "/" or "./" is
// dropped, as tar does. `label` names the layer in messages ("layer 2 of 3 (sha256:abcd...)").
// Needs openat2 (Linux 5.6): kUnavailable without it, rather than a path walk a link could
// lead out of the tree. `stats` may be null.
Status ApplyLayer(const std::string& rootfs, const std::string& layer_path,
                  const std::string& label, const ExtractLimits& limits, ExtractStats* stats);

}  // namespace codebox::image

#endif  // CODEBOX_IMAGE_LAYER_EXTRACT_H_
