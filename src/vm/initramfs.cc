#include "vm/initramfs.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <vector>

#include "base/fs.h"
#include "base/io.h"
#include "vm/cache_key.h"
#include "vm/cpio.h"
#include "vm/modules.h"

namespace codebox::vm {

StatusOr<std::string> BuildInitramfs(const Kernel& kernel, const std::string& agent_path) {
  auto agent = base::ReadFile(agent_path);
  if (!agent.ok()) return agent.status().WithContext("read codebox-agent");
  ASSIGN_OR_RETURN(std::vector<ModuleFile> modules,
                   ResolveModules(kernel.modules_dir, GuestModules()));
  CpioWriter cpio;
  for (const char* dir : {"dev", "proc", "sys", "mnt", "mnt/ro", "mnt/rw", "mnt/root", "modules"}) {
    cpio.AddDirectory(dir);
  }
  // The kernel opens /dev/console for init's stdio before devtmpfs is mounted.
  cpio.AddCharDevice("dev/console", 5, 1);
  std::string order;
  for (size_t i = 0; i < modules.size(); ++i) {
    char file[128];
    std::snprintf(file, sizeof file, "%02zu-%s.ko", i, modules[i].name.c_str());
    cpio.AddFile(std::string("modules/") + file, modules[i].data);
    order += std::string(file) + "\n";
  }
  cpio.AddFile("modules/order", order);
  cpio.AddFile("init", *agent, 0755);
  return cpio.Finish();
}

StatusOr<std::string> EnsureInitramfs(const std::string& home, const Kernel& kernel,
                                      const std::string& agent_path) {
  ASSIGN_OR_RETURN(std::string agent_hash, HashFileHex(agent_path));
  std::string dir = home + "/initramfs";
  std::string name = kernel.release + "-" + agent_hash + ".cpio";
  std::string path = dir + "/" + name;
  if (base::PathExists(path)) return path;
  RETURN_IF_ERROR(base::MakeDirs(dir));
  ASSIGN_OR_RETURN(std::string archive, BuildInitramfs(kernel, agent_path));
  RETURN_IF_ERROR(base::WriteFile(path, archive, /*atomic=*/true));
  // Archives of earlier agent builds are dead weight. Only old ones go: another process may
  // be about to hand a recent one to QEMU (which reads it whole at start).
  time_t now = ::time(nullptr);
  if (DIR* d = ::opendir(dir.c_str())) {
    while (struct dirent* e = ::readdir(d)) {
      std::string other = dir + "/" + e->d_name;
      struct stat st;
      if (other != path && other.size() > 5 && other.substr(other.size() - 5) == ".cpio" &&
          ::stat(other.c_str(), &st) == 0 && st.st_mtime + 3600 < now) {
        ::unlink(other.c_str());
      }
    }
    ::closedir(d);
  }
  return path;
}

}  // namespace codebox::vm
