#include "vm/snapshot.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <map>

#include "base/fs.h"
#include "base/io.h"
#include "vm/cache_key.h"

namespace codebox::vm {
namespace {

constexpr const char* kMemoryFile = "memory";
constexpr const char* kStateFile = "state";
constexpr const char* kMetaFile = "meta";

// What identifies a file's contents cheaply: its path, size and change time. The files keyed
// on are codebox's own caches (rebuilt under a new name or mtime when their inputs change).
std::string FileIdentity(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return path + " missing";
  return path + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + " " + std::to_string(st.st_ino);
}

std::string MetaText(const TemplateInfo& t) {
  std::string out;
  auto put = [&](const char* k, const std::string& v) { out += std::string(k) + "=" + v + "\n"; };
  put("key", t.key);
  put("home", t.home);
  put("image_tree", t.image_tree);
  put("accel", t.accel);
  put("memory_mib", std::to_string(t.memory_mib));
  put("cpus", std::to_string(t.cpus));
  put("disk_mib", std::to_string(t.disk_mib));
  put("created_unix", std::to_string(t.created_unix));
  put("state_bytes", std::to_string(t.state_bytes));
  put("memory_checksum", t.memory_checksum);
  put("state_checksum", t.state_checksum);
  return out;
}

uint64_t Number(const std::map<std::string, std::string>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? 0 : std::strtoull(it->second.c_str(), nullptr, 10);
}

// Reads dir/meta; damaged or missing fields come back empty (FindTemplate then refuses it).
TemplateInfo ReadMeta(const std::string& dir, const std::string& key) {
  TemplateInfo t;
  t.key = key;
  t.dir = dir;
  auto text = base::ReadFile(dir + "/" + kMetaFile);
  std::map<std::string, std::string> m;
  if (text.ok() && text->size() < 64 * 1024) {
    size_t pos = 0;
    while (pos < text->size()) {
      size_t nl = text->find('\n', pos);
      if (nl == std::string::npos) nl = text->size();
      std::string line = text->substr(pos, nl - pos);
      pos = nl + 1;
      size_t eq = line.find('=');
      if (eq != std::string::npos) m[line.substr(0, eq)] = line.substr(eq + 1);
    }
  }
  t.home = m["home"];
  t.image_tree = m["image_tree"];
  t.accel = m["accel"];
  t.memory_mib = Number(m, "memory_mib");
  t.cpus = static_cast<uint32_t>(Number(m, "cpus"));
  t.disk_mib = Number(m, "disk_mib");
  t.created_unix = static_cast<int64_t>(Number(m, "created_unix"));
  t.state_bytes = Number(m, "state_bytes");
  t.memory_checksum = m["memory_checksum"];
  t.state_checksum = m["state_checksum"];
  struct stat st;
  if (::stat((dir + "/" + kMemoryFile).c_str(), &st) == 0) {
    t.memory_bytes_used = static_cast<uint64_t>(st.st_blocks) * 512;
  }
  if (m["key"] != key) t.state_checksum.clear();  // meta of another template: damaged
  return t;
}

bool IsKey(const std::string& name) {
  return name.size() == 16 && name.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

std::string TemplateRoot() {
  const char* env = std::getenv("CODEBOX_TEMPLATE_DIR");
  if (env != nullptr && env[0] == '/') return env;
  return "/dev/shm/codebox-templates";
}

StatusOr<std::string> TemplateKey(const QemuLaunch& launch) {
  if (launch.kernel.empty() || launch.initramfs.empty() || launch.disk.empty()) {
    return InvalidArgument("template key: kernel, initramfs and disk are needed");
  }
  // The arguments as a template machine gets them, with the per-box paths left out.
  QemuLaunch shape = launch;
  shape.console_log = "-";
  shape.memory_file = "-";
  shape.share_memory = true;
  shape.incoming = false;
  std::string text = "codebox vm template v1\n";
  for (const std::string& arg : QemuArgv(shape)) text += arg + "\n";
  for (const std::string* file : {&launch.qemu, &launch.kernel, &launch.initramfs, &launch.disk}) {
    text += FileIdentity(*file) + "\n";
  }
  return HashHex(text);
}

StatusOr<TemplateInfo> FindTemplate(const std::string& key) {
  if (!IsKey(key)) return InvalidArgument("not a template key: " + key);
  std::string dir = TemplateRoot() + "/" + key;
  if (::access(dir.c_str(), F_OK) != 0) return NotFound("no vm template " + key);
  TemplateInfo t = ReadMeta(dir, key);
  if (t.state_checksum.empty() || t.memory_checksum.empty()) {
    return Status(StatusCode::kIoError, "vm template " + key + " is damaged: its meta is unreadable");
  }
  struct stat st;
  if (::stat((dir + "/" + kMemoryFile).c_str(), &st) != 0 ||
      static_cast<uint64_t>(st.st_size) != t.memory_mib << 20) {
    return Status(StatusCode::kIoError,
                  "vm template " + key + " is damaged: its memory file is missing or resized");
  }
  auto state = HashFileHex(dir + "/" + kStateFile);
  if (!state.ok() || *state != t.state_checksum) {
    return Status(StatusCode::kIoError,
                  "vm template " + key + " is damaged: its state file differs from the one saved");
  }
  return t;
}

std::vector<TemplateInfo> ListTemplates() {
  std::vector<TemplateInfo> out;
  std::string root = TemplateRoot();
  for (const std::string& name : base::ListDirectory(root)) {
    if (IsKey(name)) out.push_back(ReadMeta(root + "/" + name, name));
  }
  return out;
}

Status VerifyTemplate(const TemplateInfo& info) {
  ASSIGN_OR_RETURN(std::string memory, HashSparseFileHex(info.dir + "/" + kMemoryFile));
  ASSIGN_OR_RETURN(std::string state, HashFileHex(info.dir + "/" + kStateFile));
  if (memory != info.memory_checksum || state != info.state_checksum) {
    return Status(StatusCode::kIoError, "vm template " + info.key + " changed after it was saved");
  }
  return Status::Ok();
}

void TouchTemplate(const TemplateInfo& info) { ::utimensat(AT_FDCWD, info.dir.c_str(), nullptr, 0); }

void PruneTemplates() {
  std::string root = TemplateRoot();
  std::vector<std::pair<struct timespec, std::string>> kept;  // (last use, key)
  for (const TemplateInfo& t : ListTemplates()) {
    struct stat st;
    if ((!t.image_tree.empty() && ::access(t.image_tree.c_str(), F_OK) != 0) ||
        ::stat(t.dir.c_str(), &st) != 0) {
      (void)RemoveTemplate(t.key);
      continue;
    }
    kept.emplace_back(st.st_mtim, t.key);
  }
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
    return a.first.tv_sec != b.first.tv_sec ? a.first.tv_sec > b.first.tv_sec
                                            : a.first.tv_nsec > b.first.tv_nsec;
  });
  // The one about to be made counts too.
  for (size_t i = kMaxTemplates > 0 ? kMaxTemplates - 1 : 0; i < kept.size(); ++i) {
    (void)RemoveTemplate(kept[i].second);
  }
  for (const std::string& name : base::ListDirectory(root)) {
    struct stat st;
    std::string path = root + "/" + name;
    if (name.starts_with(".making-") && ::stat(path.c_str(), &st) == 0 &&
        st.st_mtime < ::time(nullptr) - 3600) {
      (void)base::RemoveTree(path);
    }
  }
}

Status RemoveTemplate(const std::string& key) {
  if (!IsKey(key)) return InvalidArgument("not a template key: " + key);
  return base::RemoveTree(TemplateRoot() + "/" + key);
}

Status CommitTemplate(const std::string& dir, TemplateInfo info) {
  std::string memory = dir + "/" + kMemoryFile;
  std::string state = dir + "/" + kStateFile;
  ASSIGN_OR_RETURN(info.memory_checksum, HashSparseFileHex(memory));
  ASSIGN_OR_RETURN(info.state_checksum, HashFileHex(state));
  struct stat st;
  if (::stat(state.c_str(), &st) != 0) return base::ErrnoStatus("stat " + state);
  info.state_bytes = static_cast<uint64_t>(st.st_size);
  info.created_unix = static_cast<int64_t>(::time(nullptr));
  // Read-only from now on: clones open it through QEMU, which (7.2) opens the file read-write
  // even for a private mapping, but nothing of codebox writes it again.
  ::chmod(memory.c_str(), 0400);
  ::chmod(state.c_str(), 0400);
  RETURN_IF_ERROR(base::WriteFile(dir + "/" + kMetaFile, MetaText(info)));
  std::string target = TemplateRoot() + "/" + info.key;
  if (::rename(dir.c_str(), target.c_str()) != 0) {
    Status st = (errno == EEXIST || errno == ENOTEMPTY)
                    ? Status::Ok()  // another process saved the same template first
                    : base::ErrnoStatus("rename " + dir + " -> " + target);
    (void)base::RemoveTree(dir);
    return st;
  }
  return Status::Ok();
}

}  // namespace codebox::vm
