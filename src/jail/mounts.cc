#include "jail/mounts.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "base/io.h"

namespace codebox::jail::mounts {
namespace {

using base::ErrnoStatus;

Status Mount(const std::string& what, const char* source, const std::string& target,
             const char* fstype, unsigned long flags, const std::string& data = "") {
  if (::mount(source, target.c_str(), fstype, flags, data.empty() ? nullptr : data.c_str()) != 0) {
    return ErrnoStatus("mount " + what);
  }
  return Status::Ok();
}

// mount_setattr (Linux 5.12+) changes flags of a bind mount without the MS_REMOUNT dance,
// which in a user namespace fails with EPERM unless every locked flag is repeated.
Status SetAttr(const std::string& what, const std::string& path, uint64_t attr, bool recursive) {
  mount_attr ma{};
  ma.attr_set = attr;
  if (::syscall(SYS_mount_setattr, AT_FDCWD, path.c_str(), recursive ? AT_RECURSIVE : 0, &ma,
                sizeof ma) != 0) {
    return ErrnoStatus("make " + what + " read-only");
  }
  return Status::Ok();
}

constexpr uint64_t kReadOnly = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;

Status MakeDir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + path);
  // mkdir applies the umask; the sticky/world bits of /tmp must be exact.
  if (::chmod(path.c_str(), mode) != 0) return ErrnoStatus("chmod " + path);
  return Status::Ok();
}

Status MakeFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("create " + path);
  ::close(fd);
  return Status::Ok();
}

Status BindFile(const std::string& what, const std::string& source, const std::string& target,
                uint64_t attr) {
  RETURN_IF_ERROR(MakeFile(target));
  RETURN_IF_ERROR(Mount(what, source.c_str(), target, nullptr, MS_BIND));
  if (attr != 0) RETURN_IF_ERROR(SetAttr(what, target, attr, false));
  return Status::Ok();
}

// Names of the writable directories: box path -> directory on the scratch tmpfs, and mode.
struct Writable {
  std::string box_path;
  std::string data_name;
  mode_t mode;
};

std::vector<Writable> WritableDirs(const std::string& workdir) {
  // /data is where callers put inputs (codebox ask --file, copy_in), so it is writable too.
  std::vector<Writable> out = {{"/tmp", "tmp", 01777},
                               {"/var/tmp", "var_tmp", 01777},
                               {"/root", "root", 0700},
                               {"/data", "data", 0755}};
  if (workdir != "/tmp" && workdir != "/root" && workdir != "/var/tmp" && workdir != "/data") {
    out.push_back({workdir, "workdir", 0755});
  }
  return out;
}

// The image as the box's root: a read-only overlay whose lower layers are a small skeleton
// (the mount points the image may lack) above the image. Lower layers only: there is no upper
// layer, so nothing is ever copied up, the overlay cannot be written, and the copy-up paths
// behind the overlayfs-in-userns CVEs are never reached. What this buys over bind mounts of
// the image: the overlay is its own superblock, so /proc/self/mountinfo shows "/" as its root
// and "lowerdir=/proc/self/fd/N" as its options, never the image store's host path (a bind
// mount shows its source path within the host filesystem, and that filesystem's device).
Status MountImageRoot(const std::string& skeleton, const std::string& rootfs,
                      const std::string& newroot) {
  base::UniqueFd skel(::open(skeleton.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!skel.valid()) return ErrnoStatus("open skeleton");
  base::UniqueFd image(::open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!image.valid()) return ErrnoStatus("open image " + rootfs);
  // overlayfs keeps the option strings as given: fd paths name nothing on the host.
  // redirect_dir/metacopy: follow no redirects or metacopy xattrs found in the layers.
  std::string options = "lowerdir=/proc/self/fd/" + std::to_string(skel.get()) + ":/proc/self/fd/" +
                        std::to_string(image.get()) + ",redirect_dir=nofollow,metacopy=off";
  RETURN_IF_ERROR(Mount("image root (overlay)", "codebox", newroot, "overlay",
                        MS_RDONLY | MS_NOSUID | MS_NODEV, options));
  return SetAttr("image root", newroot, kReadOnly, false);
}

// /proc entries that describe the host rather than the box, masked as runc's default spec
// and Docker do: files by /dev/null, directories by an empty read-only tmpfs. cmdline and
// config.gz too: the host kernel's command line can carry infrastructure details or secrets,
// and its configuration helps only someone choosing a kernel exploit.
constexpr const char* kMaskedProcFiles[] = {
    "kcore",      "keys",    "timer_list", "sched_debug", "latency_stats", "timer_stats",
    "interrupts", "cmdline", "config.gz",  "kallsyms",    "sysrq-trigger"};
constexpr const char* kMaskedProcDirs[] = {"acpi", "scsi", "asound"};
// Readable, never writable (runc's read-only paths).
constexpr const char* kReadOnlyProc[] = {"sys", "irq", "bus", "fs"};

Status MaskProc(const std::string& proc) {
  for (const char* name : kMaskedProcFiles) {
    std::string target = proc + "/" + name;
    struct stat sb {};
    if (::lstat(target.c_str(), &sb) != 0) continue;  // not in this kernel's config
    // Reads give EOF, writes vanish; nothing to gain from a read-only flag (a mount each).
    RETURN_IF_ERROR(
        Mount(std::string("mask /proc/") + name, "/dev/null", target, nullptr, MS_BIND));
  }
  for (const char* name : kMaskedProcDirs) {
    std::string target = proc + "/" + name;
    struct stat sb {};
    if (::lstat(target.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
    RETURN_IF_ERROR(Mount(std::string("mask /proc/") + name, "codebox-masked", target, "tmpfs",
                          MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          "size=4k,nr_inodes=2,mode=0555"));
  }
  for (const char* name : kReadOnlyProc) {
    std::string target = proc + "/" + name;
    struct stat sb {};
    if (::lstat(target.c_str(), &sb) != 0) continue;
    RETURN_IF_ERROR(
        Mount(std::string("/proc/") + name, target.c_str(), target, nullptr, MS_BIND | MS_REC));
    RETURN_IF_ERROR(SetAttr(
        std::string("/proc/") + name, target,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, true));
  }
  return Status::Ok();
}

// Makes `box_path` in the skeleton. A top-level one the image may lack; a deeper one (an
// image's WorkingDir such as /srv/app) only where its parent is a directory in the image, so
// the skeleton's directories merge with the image's instead of hiding what the image has
// there. The parent is looked up with the image's tree as its root (a symlink in the image
// never leads to the host's files).
Status MakeMountPoint(const std::string& skel, const std::string& rootfs,
                      const std::string& box_path) {
  const size_t last = box_path.rfind('/');
  if (last != 0) {
    base::UniqueFd image(::open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!image.valid()) return ErrnoStatus("open image " + rootfs);
    open_how how{};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    const std::string parent = box_path.substr(1, last - 1);
    base::UniqueFd dir(
        static_cast<int>(::syscall(SYS_openat2, image.get(), parent.c_str(), &how, sizeof how)));
    if (!dir.valid()) {
      return NotFound("workdir " + box_path + ": its parent is not a directory in the image");
    }
  }
  for (size_t slash = box_path.find('/', 1);; slash = box_path.find('/', slash + 1)) {
    RETURN_IF_ERROR(MakeDir(skel + box_path.substr(0, slash), 0755));
    if (slash == std::string::npos) return Status::Ok();
  }
}

// `dev` exists: the skeleton layer provides it.
Status BuildDev(const std::string& dev, const std::string& data) {
  RETURN_IF_ERROR(Mount("/dev tmpfs", "codebox-dev", dev, "tmpfs", MS_NOSUID | MS_NOEXEC,
                        "size=64k,nr_inodes=64,mode=0755"));
  for (const char* node : {"null", "zero", "full", "random", "urandom", "tty"}) {
    // Device nodes cannot be created in a user namespace; binding the host's is the way, and
    // only these harmless ones are offered.
    RETURN_IF_ERROR(BindFile(std::string("/dev/") + node, std::string("/dev/") + node,
                             dev + "/" + node, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC));
  }
  RETURN_IF_ERROR(MakeDir(dev + "/pts", 0755));
  RETURN_IF_ERROR(Mount("/dev/pts", "devpts", dev + "/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                        "newinstance,ptmxmode=0666,mode=0620"));
  RETURN_IF_ERROR(MakeDir(dev + "/shm", 01777));
  RETURN_IF_ERROR(Mount("/dev/shm", (data + "/shm").c_str(), dev + "/shm", nullptr, MS_BIND));
  RETURN_IF_ERROR(SetAttr("/dev/shm", dev + "/shm", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false));
  const std::pair<const char*, const char*> links[] = {{"pts/ptmx", "ptmx"},
                                                       {"/proc/self/fd", "fd"},
                                                       {"/proc/self/fd/0", "stdin"},
                                                       {"/proc/self/fd/1", "stdout"},
                                                       {"/proc/self/fd/2", "stderr"}};
  for (const auto& [target, name] : links) {
    if (::symlink(target, (dev + "/" + name).c_str()) != 0) {
      return ErrnoStatus(std::string("symlink /dev/") + name);
    }
  }
  return SetAttr("/dev", dev, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false);
}

}  // namespace

Status ValidateWorkdir(const std::string& workdir) {
  if (workdir.empty() || workdir[0] != '/' || workdir == "/") {
    return InvalidArgument("workdir must be an absolute path other than /: '" + workdir + "'");
  }
  if (workdir.find("//") != std::string::npos || workdir.back() == '/' ||
      workdir.find("/./") != std::string::npos || workdir.find("/../") != std::string::npos ||
      workdir.ends_with("/..") || workdir.ends_with("/.") ||
      workdir.find('\n') != std::string::npos) {
    return InvalidArgument("workdir must be a normalised path: '" + workdir + "'");
  }
  for (const char* reserved :
       {"/proc", "/dev", "/sys", "/.codebox", "/usr", "/etc", "/bin", "/lib", "/lib64", "/sbin"}) {
    std::string r = reserved;
    if (workdir == r || workdir.starts_with(r + "/")) {
      return InvalidArgument("workdir may not be in " + r + ": '" + workdir + "'");
    }
  }
  return Status::Ok();
}

Status BuildRootAndPivot(const SupervisorConfig& c) {
  const std::string& s = c.staging_dir;
  const std::string newroot = s + "/root", data = s + "/data", skel = s + "/skel";
  // Nothing we mount may propagate back to the host's namespace.
  RETURN_IF_ERROR(Mount("make / private", nullptr, "/", nullptr, MS_REC | MS_PRIVATE));
  // One tmpfs holds every writable byte, so its size is the box's disk limit.
  RETURN_IF_ERROR(Mount("scratch tmpfs", "codebox", s, "tmpfs", MS_NOSUID | MS_NODEV,
                        "size=" + std::to_string(c.jail.disk_bytes) + ",mode=0755"));
  RETURN_IF_ERROR(MakeDir(newroot, 0755));
  RETURN_IF_ERROR(MakeDir(data, 0755));
  RETURN_IF_ERROR(MakeDir(skel, 0755));
  const auto writable = WritableDirs(c.jail.workdir);
  // Mount points come from the skeleton layer, above the image.
  for (const char* name : {"proc", "dev", "sys"}) RETURN_IF_ERROR(MakeDir(skel + "/" + name, 0555));
  for (const auto& w : writable) {
    Status made = MakeMountPoint(skel, c.jail.rootfs, w.box_path);
    if (!made.ok() && w.box_path != "/var/tmp") return made;  // /var/tmp is optional
  }
  RETURN_IF_ERROR(MountImageRoot(skel, c.jail.rootfs, newroot));

  for (const auto& w : writable) {
    RETURN_IF_ERROR(MakeDir(data + "/" + w.data_name, w.mode));
    // With a box user, the workdir and /data (where callers put inputs) are the user's: the
    // agent works on files as the user (it could not give them away later, without CAP_CHOWN).
    // /tmp and /var/tmp stay everyone's, /root root's.
    const bool users = w.box_path == c.jail.workdir || w.box_path == "/data";
    if (c.jail.user && users && (w.mode & S_ISVTX) == 0 &&
        ::chown((data + "/" + w.data_name).c_str(), c.jail.user->uid, c.jail.user->gid) != 0) {
      return ErrnoStatus("give " + w.box_path + " to the box's user");
    }
    std::string target = newroot + w.box_path;
    struct stat sb {};
    if (::stat(target.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) {
      if (w.box_path == "/var/tmp") continue;  // optional
      return NotFound("workdir " + w.box_path + ": its parent is not a directory in the image");
    }
    RETURN_IF_ERROR(
        Mount(w.box_path, (data + "/" + w.data_name).c_str(), target, nullptr, MS_BIND));
    RETURN_IF_ERROR(SetAttr(w.box_path, target, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false));
  }
  RETURN_IF_ERROR(MakeDir(data + "/shm", 01777));

  RETURN_IF_ERROR(
      Mount("/proc", "proc", newroot + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC));
  RETURN_IF_ERROR(MaskProc(newroot + "/proc"));
  // /sys stays an empty directory: nothing in a box needs sysfs, and it is a large
  // host-information surface.
  RETURN_IF_ERROR(BuildDev(newroot + "/dev", data));

  // pivot_root(".", ".") stacks the old root on top of the new one; detaching "." then drops
  // it, with no directory for the old root left behind in the box.
  if (::chdir(newroot.c_str()) != 0) return ErrnoStatus("chdir new root");
  if (::syscall(SYS_pivot_root, ".", ".") != 0) return ErrnoStatus("pivot_root");
  if (::umount2(".", MNT_DETACH) != 0) return ErrnoStatus("detach old root");
  if (::chdir("/") != 0) return ErrnoStatus("chdir /");
  return Status::Ok();
}

}  // namespace codebox::jail::mounts
