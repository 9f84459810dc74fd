#include "vm/kernel.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>
#include <vector>

#include "base/fs.h"
#include "base/io.h"
#include "base/owner.h"
#include "base/subprocess.h"
#include "base/unique_fd.h"

namespace codebox::vm {
namespace {

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  size_t start = s.find_first_not_of(" \t");
  return start == std::string::npos ? "" : s.substr(start);
}

Kernel KernelAt(const std::string& home, const std::string& release) {
  Kernel k;
  k.release = release;
  k.dir = home + "/kernels/" + release;
  k.vmlinuz = k.dir + "/vmlinuz";
  k.modules_dir = k.dir + "/modules";
  auto package = base::ReadFile(k.dir + "/package");
  if (package.ok()) k.package = Trim(*package);
  return k;
}

// `apt-cache depends linux-image-cloud-amd64` -> "linux-image-6.1.0-57-cloud-amd64".
StatusOr<std::string> ResolveKernelPackage() {
  auto out = base::RunChecked(base::Command({"apt-cache", "depends", kKernelMetaPackage}));
  if (!out.ok())
    return out.status().WithContext("apt-cache depends " + std::string(kKernelMetaPackage));
  std::istringstream lines(out->out);
  for (std::string line; std::getline(lines, line);) {
    line = Trim(line);
    const std::string prefix = "Depends: ";
    if (line.rfind(prefix, 0) != 0) continue;
    std::string dep = Trim(line.substr(prefix.size()));
    if (dep.rfind("linux-image-", 0) == 0) return dep;
  }
  return NotFound("apt-cache depends " + std::string(kKernelMetaPackage) +
                  " names no linux-image-* dependency");
}

// Downloads and unpacks into a temp dir under <home>/kernels, then renames it into place so
// a half-unpacked kernel is never seen.
StatusOr<Kernel> FetchKernel(const std::string& home) {
  ASSIGN_OR_RETURN(std::string package, ResolveKernelPackage());
  ASSIGN_OR_RETURN(std::string tmp,
                   base::MakeTempDir(home + "/kernels", ".fetch-" + base::OwnerTag() + "-"));
  auto fetch = [&]() -> StatusOr<Kernel> {
    // As root apt drops to _apt for downloads, which cannot write our temp dir.
    base::Command download({"apt-get", "download", "-q"});
    if (::geteuid() == 0) {
      download.argv.push_back("-o");
      download.argv.push_back("APT::Sandbox::User=root");
    }
    download.argv.push_back(package);
    download.cwd = tmp;
    RETURN_IF_ERROR(base::RunChecked(download).status().WithContext("apt-get download " + package));
    std::string deb;
    for (const auto& name : base::ListDirectory(tmp)) {
      if (name.size() > 4 && name.substr(name.size() - 4) == ".deb") deb = tmp + "/" + name;
    }
    if (deb.empty()) return NotFound("apt-get download " + package + " left no .deb");
    auto version = base::RunChecked(base::Command({"dpkg-deb", "-f", deb, "Version"}));
    RETURN_IF_ERROR(version.status());
    RETURN_IF_ERROR(
        base::RunChecked(base::Command({"dpkg-deb", "-x", deb, tmp + "/root"})).status());
    std::vector<std::string> releases = base::ListDirectory(tmp + "/root/lib/modules");
    if (releases.size() != 1) return NotFound(package + ": expected one lib/modules/<release>");
    const std::string& release = releases[0];
    std::string out = tmp + "/out";
    RETURN_IF_ERROR(base::MakeDirs(out));
    auto move = [](const std::string& from, const std::string& to) -> Status {
      if (::rename(from.c_str(), to.c_str()) != 0) return base::ErrnoStatus("rename " + from);
      return Status::Ok();
    };
    RETURN_IF_ERROR(move(tmp + "/root/boot/vmlinuz-" + release, out + "/vmlinuz"));
    RETURN_IF_ERROR(move(tmp + "/root/boot/config-" + release, out + "/config"));
    RETURN_IF_ERROR(move(tmp + "/root/lib/modules/" + release, out + "/modules"));
    RETURN_IF_ERROR(base::WriteFile(out + "/package", package + " " + Trim(version->out) + "\n"));
    std::string final_dir = home + "/kernels/" + release;
    if (::rename(out.c_str(), final_dir.c_str()) != 0 && errno != EEXIST && errno != ENOTEMPTY) {
      return base::ErrnoStatus("rename " + out + " -> " + final_dir);
    }
    RETURN_IF_ERROR(base::WriteFile(home + "/kernels/default", release + "\n", /*atomic=*/true));
    return KernelAt(home, release);
  };
  StatusOr<Kernel> result = fetch();
  (void)base::RemoveTree(tmp);
  if (!result.ok()) {
    return Unavailable("vm driver: cannot fetch the guest kernel (" + package + "): " +
                       result.status().message() + "; check that apt works (run: apt-get update)");
  }
  return result;
}

}  // namespace

StatusOr<Kernel> FindCachedKernel(const std::string& home) {
  auto release = base::ReadFile(home + "/kernels/default");
  if (release.ok()) {
    Kernel k = KernelAt(home, Trim(*release));
    if (!k.release.empty() && base::PathExists(k.vmlinuz) && base::PathExists(k.modules_dir))
      return k;
  }
  return NotFound("no guest kernel in " + home + "/kernels");
}

StatusOr<Kernel> EnsureKernel(const std::string& home) {
  auto cached = FindCachedKernel(home);
  if (cached.ok()) return cached;
  RETURN_IF_ERROR(base::MakeDirs(home + "/kernels"));
  // Serialize concurrent first fetches (two boxes starting at once) on a lock file.
  base::UniqueFd lock(
      ::open((home + "/kernels/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!lock.valid()) return base::ErrnoStatus("open " + home + "/kernels/.lock");
  while (::flock(lock.get(), LOCK_EX) != 0 && errno == EINTR) {
  }
  cached = FindCachedKernel(home);
  if (cached.ok()) return cached;
  return FetchKernel(home);
}

}  // namespace codebox::vm
