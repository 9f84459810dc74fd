#include "vm/modules.h"

#include <dirent.h>
#include <elf.h>
#include <sys/stat.h>

#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "base/io.h"
#include "base/subprocess.h"

namespace codebox::vm {
namespace {

// "virtio-ring" and "virtio_ring" are the same module to the kernel.
std::string Normalize(std::string name) {
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

// Module name of a file name, or "" if it is not a module: "erofs.ko.xz" -> "erofs".
std::string ModuleNameOf(const std::string& file) {
  for (const char* ext : {".ko", ".ko.xz", ".ko.zst", ".ko.gz"}) {
    size_t n = std::strlen(ext);
    if (file.size() > n && file.compare(file.size() - n, n, ext) == 0) {
      return Normalize(file.substr(0, file.size() - n));
    }
  }
  return "";
}

void IndexTree(const std::string& dir, std::map<std::string, std::string>* index) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string path = dir + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      IndexTree(path, index);
    } else if (std::string mod = ModuleNameOf(name); !mod.empty()) {
      index->emplace(mod, path);
    }
  }
  ::closedir(d);
}

// Reads a module file, decompressing at assembly time so the guest only ever sees plain
// .ko files (finit_module on compressed modules needs kernel support we cannot assume).
StatusOr<std::string> ReadModule(const std::string& path) {
  auto ends_with = [&](const char* ext) {
    size_t n = std::strlen(ext);
    return path.size() > n && path.compare(path.size() - n, n, ext) == 0;
  };
  const char* tool = ends_with(".xz")    ? "xz"
                     : ends_with(".zst") ? "zstd"
                     : ends_with(".gz")  ? "gzip"
                                         : nullptr;
  if (tool == nullptr) return base::ReadFile(path);
  auto out = base::RunChecked(base::Command({tool, "-dc", path}));
  if (!out.ok()) return out.status().WithContext("decompress " + path);
  return std::move(out->out);
}

}  // namespace

StatusOr<std::string> ModinfoField(const std::string& elf, const std::string& key) {
  if (elf.size() < sizeof(Elf64_Ehdr) || std::memcmp(elf.data(), ELFMAG, SELFMAG) != 0 ||
      elf[EI_CLASS] != ELFCLASS64) {
    return InvalidArgument("not a 64-bit ELF module");
  }
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof eh);
  auto section = [&](size_t i, Elf64_Shdr* out) {
    size_t off = eh.e_shoff + i * sizeof(Elf64_Shdr);
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || off + sizeof(Elf64_Shdr) > elf.size()) return false;
    std::memcpy(out, elf.data() + off, sizeof *out);
    return out->sh_offset <= elf.size() && out->sh_size <= elf.size() - out->sh_offset;
  };
  Elf64_Shdr names;
  if (!section(eh.e_shstrndx, &names)) return InvalidArgument("bad ELF section table");
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh;
    if (!section(i, &sh) || sh.sh_name >= names.sh_size) continue;
    const char* name = elf.data() + names.sh_offset + sh.sh_name;
    if (std::strncmp(name, ".modinfo", names.sh_size - sh.sh_name) != 0) continue;
    // .modinfo is a run of NUL-terminated "key=value" strings.
    std::string_view info(elf.data() + sh.sh_offset, sh.sh_size);
    const std::string prefix = key + "=";
    size_t pos = 0;
    while (pos < info.size()) {
      size_t end = info.find('\0', pos);
      if (end == std::string_view::npos) end = info.size();
      std::string_view entry = info.substr(pos, end - pos);
      if (entry.substr(0, prefix.size()) == prefix) {
        return std::string(entry.substr(prefix.size()));
      }
      pos = end + 1;
    }
    return std::string();
  }
  return NotFound("module has no .modinfo section");
}

StatusOr<std::vector<ModuleFile>> ResolveModules(const std::string& modules_dir,
                                                 const std::vector<std::string>& wanted) {
  std::map<std::string, std::string> index;
  IndexTree(modules_dir + "/kernel", &index);
  std::set<std::string> builtin;
  if (auto text = base::ReadFile(modules_dir + "/modules.builtin"); text.ok()) {
    size_t pos = 0;
    while (pos < text->size()) {
      size_t end = text->find('\n', pos);
      if (end == std::string::npos) end = text->size();
      std::string line = text->substr(pos, end - pos);
      builtin.insert(ModuleNameOf(line.substr(line.rfind('/') + 1)));
      pos = end + 1;
    }
  }

  std::vector<ModuleFile> ordered;
  std::set<std::string> done, visiting;
  // Depth-first, dependencies before dependents. Soft dependencies ("softdep=pre: crc32c")
  // are named by alias and are optional; the cloud kernel has them built in, so skip them.
  std::function<Status(const std::string&)> visit = [&](const std::string& raw) -> Status {
    std::string name = Normalize(raw);
    if (done.count(name) || builtin.count(name)) return Status::Ok();
    if (visiting.count(name)) return InvalidArgument("module dependency cycle at " + name);
    auto it = index.find(name);
    if (it == index.end())
      return NotFound("kernel module " + name + " not found in " + modules_dir);
    visiting.insert(name);
    ASSIGN_OR_RETURN(std::string data, ReadModule(it->second));
    auto depends = ModinfoField(data, "depends");
    if (!depends.ok()) return depends.status().WithContext(it->second);
    size_t pos = 0;
    while (pos < depends->size()) {
      size_t end = depends->find(',', pos);
      if (end == std::string::npos) end = depends->size();
      if (end > pos) RETURN_IF_ERROR(visit(depends->substr(pos, end - pos)));
      pos = end + 1;
    }
    visiting.erase(name);
    done.insert(name);
    ordered.push_back({name, std::move(data)});
    return Status::Ok();
  };
  for (const auto& name : wanted) RETURN_IF_ERROR(visit(name));
  return ordered;
}

}  // namespace codebox::vm
