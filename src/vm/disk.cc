#include "vm/disk.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/fs.h"
#include "base/io.h"
#include "base/owner.h"
#include "base/subprocess.h"
#include "vm/cache_key.h"

namespace codebox::vm {
namespace {

bool Fresh(const std::string& disk, const struct stat& tree) {
  struct stat st;
  if (::stat(disk.c_str(), &st) != 0 || st.st_size == 0) return false;
  return st.st_mtim.tv_sec > tree.st_mtim.tv_sec ||
         (st.st_mtim.tv_sec == tree.st_mtim.tv_sec && st.st_mtim.tv_nsec >= tree.st_mtim.tv_nsec);
}

std::string ParentDir(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

StatusOr<std::string> EnsureErofsDisk(const std::string& home, const std::string& image_tree) {
  std::string tree = image_tree;
  while (tree.size() > 1 && tree.back() == '/') tree.pop_back();
  struct stat tree_st;
  if (::stat(tree.c_str(), &tree_st) != 0 || !S_ISDIR(tree_st.st_mode)) {
    return NotFound("image tree " + tree + " is not a directory");
  }
  std::string disk = tree + ".erofs";
  if (::access(ParentDir(tree).c_str(), W_OK) != 0) {
    RETURN_IF_ERROR(base::MakeDirs(home + "/disks"));
    disk = home + "/disks/" + HashHex(tree) + ".erofs";
  }
  if (Fresh(disk, tree_st)) return disk;
  if (base::FindProgram("mkfs.erofs").empty()) {
    return Unavailable("vm driver: mkfs.erofs not found (run: apt-get install erofs-utils)");
  }
  // Built under a unique temp name and renamed: a box never sees a half-written disk, and
  // two processes building at once both end with a complete file.
  std::string tmp = disk + ".tmp." + base::OwnerTag() + "." + HashHex(std::to_string(::gettid()));
  // --preserve-mtime: without it erofs-utils stores compact inodes stamped with the build
  // time, every .pyc then mismatches its source's mtime and Python recompiles the standard
  // library on each box's first run (~1 s under tcg).
  auto built =
      base::RunChecked(base::Command({"mkfs.erofs", "--quiet", "--preserve-mtime", tmp, tree}));
  if (!built.ok()) {
    ::unlink(tmp.c_str());
    return built.status().WithContext("build erofs disk from " + tree);
  }
  if (::rename(tmp.c_str(), disk.c_str()) != 0) {
    Status st = base::ErrnoStatus("rename " + tmp + " -> " + disk);
    ::unlink(tmp.c_str());
    return st;
  }
  return disk;
}

}  // namespace codebox::vm
