// Store layout shared by store.cc (lookups) and builder.cc (builds):
//   $home/images/<id>/rootfs          the tree
//   $home/images/<id>/manifest.json   what it is (written last, inside the temp dir)
//   $home/images/by-name/<name>       symlink "../<id>" to the newest build of a name
//   $home/images/by-ref/<reference>   symlink "../<id>" for an OCI reference ('/' as '%')
//   $home/images/.tmp-<id>-<pid>/     a build in progress (or a dead one, to clean)
//   $home/images/.tmp-oci-<n>-<pid>/  skopeo's download of an OCI image
#ifndef CODEBOX_IMAGE_STORE_INTERNAL_H_
#define CODEBOX_IMAGE_STORE_INTERNAL_H_

#include <functional>
#include <string>
#include <utility>

#include "base/unique_fd.h"
#include "codebox/status.h"
#include "image/store.h"

namespace codebox::image {

inline std::string ImagesDir(const std::string& home) { return home + "/images"; }
inline std::string ByNameDir(const std::string& home) { return home + "/images/by-name"; }
inline std::string ByRefDir(const std::string& home) { return home + "/images/by-ref"; }

Status WriteManifest(const std::string& path, const BuildRecord& record,
                     const std::string& recipe_text);
// Points images/by-name/<name> at <id>, atomically (symlink to a temp name, rename over).
Status SetNamePointer(const std::string& home, const std::string& name, const std::string& id);
// The same for `pointer_dir`/<name> (by-name or by-ref).
Status SetPointer(const std::string& pointer_dir, const std::string& name, const std::string& id);
// The id `pointer_dir`/<name> points at, or "" when there is no pointer.
std::string ReadPointer(const std::string& pointer_dir, const std::string& name);

std::string NowIso8601();

// Removes leftovers (.tmp-*-<pid>) of builds and pulls that died; a live build of the same
// id is an error rather than a race.
Status CleanStaleTemps(const std::string& images_dir, const std::string& id,
                       const std::function<void(const std::string&)>& say);

// A build's temp dir images/.tmp-<tag>-<pid>: made empty and locked (flock, held by every
// tool the build starts through lock_fd(), so that CleanStaleTemps leaves a tree alone while
// an orphaned tool still writes it), and removed with everything in it when this object
// goes, unless CommitTo moved it away.
class StagingDir {
 public:
  static StatusOr<StagingDir> Create(const std::string& images_dir, const std::string& tag);
  StagingDir(StagingDir&& other) noexcept
      : path_(std::exchange(other.path_, {})), lock_(std::move(other.lock_)) {}
  StagingDir& operator=(StagingDir&&) = delete;
  ~StagingDir();

  const std::string& path() const { return path_; }
  int lock_fd() const { return lock_.get(); }
  // Renames it to `final_dir`; with an existing `final_dir`, swaps the two atomically (readers
  // see the old or the new tree, never neither) and removes the old one.
  Status CommitTo(const std::string& final_dir);

 private:
  StagingDir(std::string path, base::UniqueFd lock)
      : path_(std::move(path)), lock_(std::move(lock)) {}
  std::string path_;
  base::UniqueFd lock_;
};

}  // namespace codebox::image

#endif  // CODEBOX_IMAGE_STORE_INTERNAL_H_
