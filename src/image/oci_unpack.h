// The second half of a pull or import: an OCI layout that skopeo wrote -> a tree in the store.
// Shared by PullImage and ImportImage (oci_import.cc); not part of the image API.
#ifndef CODEBOX_IMAGE_OCI_UNPACK_H_
#define CODEBOX_IMAGE_OCI_UNPACK_H_

#include <string>
#include <vector>

#include "codebox/status.h"
#include "image/oci_import.h"
#include "image/store.h"

namespace codebox::image {

struct UnpackRequest {
  std::string home;
  std::string reference;               // canonical; the image's name in the store
  std::string digest;                  // the registry's manifest digest; empty: the layout's own
  std::vector<std::string> pointers;   // canonical references that name the image after
  std::string expected_config_digest;  // empty: whatever the layout has
  std::string source_path;             // an import's file, for the manifest
};

// The store id of an image with this config (it pins the layers: their diff ids are in it),
// unpacked with or without setuid bits.
std::string OciImageId(const std::string& config_digest, bool keep_setuid);

// The image with request.expected_config_digest when the store has it, its pointers set.
StatusOr<ImageInfo> FindUnpacked(const UnpackRequest& request, const PullOptions& options);

// Checks the layout (every blob's digest), unpacks its layers into a staging tree with the
// size limits, resolves the image's user against the tree's /etc/passwd and /etc/group, and
// moves the tree into the store; nothing half-built is left on error.
StatusOr<ImageInfo> UnpackLayout(const UnpackRequest& request, const std::string& layout_dir,
                                 const PullOptions& options, const Progress& progress);

// Resolves config->user ("app", "1000", "app:staff", "1000:50": an image's User, or
// BoxOptions::user put in its place) against the tree's
// /etc/passwd and /etc/group (read inside the tree), filling uid, gid and home. Root (none
// given, "root", "0", "0:0") leaves uid and gid unset.
Status ResolveImageUser(int root_fd, ImageConfig* config);

// skopeo's transport for `path`: "oci" (a directory with an oci-layout file), "oci-archive"
// (a tar holding one) or "docker-archive" (a `docker save` tar, with manifest.json).
StatusOr<std::string> DetectArchiveTransport(const std::string& path);
// The name the archive or layout at `path` (of that transport) gives its image: a docker-save
// archive's first RepoTags entry, or an OCI index's ref.name annotation when it is a whole
// reference (not a bare tag); "" when it gives none.
std::string ArchiveImageName(const std::string& path, const std::string& transport);

}  // namespace codebox::image

#endif  // CODEBOX_IMAGE_OCI_UNPACK_H_
