#include "image/oci_unpack.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "base/fs.h"
#include "base/io.h"
#include "base/text.h"
#include "image/build_steps.h"
#include "image/layer_extract.h"
#include "image/oci_layout.h"
#include "base/sha256.h"
#include "image/store_internal.h"
#include "image/tree_fs.h"

namespace codebox::image {
namespace {

// Bump when the same layout would unpack to a different tree.
constexpr char kUnpackerVersion[] = "oci-1";
constexpr uint64_t kMaxAccountFileBytes = 4u << 20;  // /etc/passwd, /etc/group

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t end; (end = s.find(sep, start)) != std::string::npos; start = end + 1) {
    out.push_back(s.substr(start, end - start));
  }
  out.push_back(s.substr(start));
  return out;
}

std::optional<uint32_t> ParseId(const std::string& s) {
  if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  uint64_t v = std::strtoull(s.c_str(), nullptr, 10);
  if (v >= (1ull << 31)) return std::nullopt;  // beyond any id a user namespace maps
  return static_cast<uint32_t>(v);
}

struct AccountEntry {
  std::string name;
  uint32_t id = 0;
  uint32_t gid = 0;  // passwd only
  std::string home;  // passwd only
};

// Lines of /etc/passwd (name:x:uid:gid:gecos:home:shell) or /etc/group (name:x:gid:members);
// malformed lines are skipped, as libc does.
std::vector<AccountEntry> ReadAccounts(int root_fd, const std::string& path, bool passwd) {
  std::vector<AccountEntry> out;
  auto text = ReadTreeFile(root_fd, path, kMaxAccountFileBytes);
  if (!text.ok()) return out;
  for (const std::string& line : Split(*text, '\n')) {
    std::vector<std::string> f = Split(line, ':');
    if (f.size() < (passwd ? 7u : 3u) || f[0].empty()) continue;
    auto id = ParseId(f[2]);
    if (!id) continue;
    AccountEntry e{f[0], *id, 0, ""};
    if (passwd) {
      auto gid = ParseId(f[3]);
      if (!gid) continue;
      e.gid = *gid;
      e.home = f[5];
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

Status ResolveImageUser(int root_fd, ImageConfig* config) {
  config->uid.reset();
  config->gid.reset();
  config->home.clear();
  if (config->user.empty()) return Status::Ok();
  std::vector<std::string> parts = Split(config->user, ':');
  if (parts.size() > 2 || parts[0].empty()) {
    return InvalidArgument("user '" + base::TerminalSafe(config->user, 100) +
                           "' is not USER or USER:GROUP");
  }
  const std::vector<AccountEntry> users = ReadAccounts(root_fd, "/etc/passwd", true);
  const AccountEntry* entry = nullptr;
  uint32_t uid = 0;
  if (auto id = ParseId(parts[0])) {
    uid = *id;
    for (const AccountEntry& u : users) {
      if (u.id == uid && entry == nullptr) entry = &u;
    }
  } else {
    for (const AccountEntry& u : users) {
      if (u.name == parts[0] && entry == nullptr) entry = &u;
    }
    if (entry == nullptr) {
      return InvalidArgument("user '" + base::TerminalSafe(parts[0], 100) +
                             "' is not in the image's /etc/passwd");
    }
    uid = entry->id;
  }
  // As docker does: a user without a passwd entry runs with group 0.
  uint32_t gid = entry != nullptr ? entry->gid : 0;
  if (parts.size() == 2) {
    if (auto id = ParseId(parts[1])) {
      gid = *id;
    } else {
      bool found = false;
      for (const AccountEntry& g : ReadAccounts(root_fd, "/etc/group", false)) {
        if (g.name == parts[1]) {
          gid = g.id;
          found = true;
          break;
        }
      }
      if (!found) {
        return InvalidArgument("user '" + base::TerminalSafe(config->user, 100) +
                               "' names group '" + base::TerminalSafe(parts[1], 100) +
                               "', which is not in the image's /etc/group");
      }
    }
  }
  if (uid == 0 && gid == 0) return Status::Ok();
  config->uid = uid;
  config->gid = gid;
  std::string home = entry != nullptr ? entry->home : "";
  config->home = home.starts_with("/") && home.find('\0') == std::string::npos ? home : "/";
  return Status::Ok();
}

std::string OciImageId(const std::string& config_digest, bool keep_setuid) {
  return base::Sha256Hex(std::string(kUnpackerVersion) + "\n" + config_digest +
                   (keep_setuid ? "\nkeep-setuid" : ""))
      .substr(0, 16);
}

namespace {

Status SetPointers(const UnpackRequest& request, const std::string& id) {
  for (const std::string& ref : request.pointers) {
    RETURN_IF_ERROR(SetPointer(ByRefDir(request.home), RefPointerName(ref), id));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ImageInfo> FindUnpacked(const UnpackRequest& request, const PullOptions& options) {
  if (request.expected_config_digest.empty()) return NotFound("no config digest");
  const std::string id = OciImageId(request.expected_config_digest, options.keep_setuid);
  const std::string dir = ImagesDir(request.home) + "/" + id;
  ASSIGN_OR_RETURN(BuildRecord record, ReadManifest(dir));
  RETURN_IF_ERROR(SetPointers(request, id));
  record.info.store = request.home;
  return record.info;
}

StatusOr<ImageInfo> UnpackLayout(const UnpackRequest& request, const std::string& layout_dir,
                                 const PullOptions& options, const Progress& progress) {
  auto start = std::chrono::steady_clock::now();
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  ASSIGN_OR_RETURN(OciImage image, ReadOciLayout(layout_dir, options.max_bytes));
  if (!request.expected_config_digest.empty() &&
      image.config_digest != request.expected_config_digest) {
    return ProtocolError("digest mismatch: the image fetched has config " + image.config_digest +
                         ", not the " + request.expected_config_digest + " its manifest names");
  }
  const std::string id = OciImageId(image.config_digest, options.keep_setuid);
  const std::string images_dir = ImagesDir(request.home);
  const std::string final_dir = images_dir + "/" + id;
  if (!options.force && base::PathExists(final_dir + "/manifest.json")) {
    UnpackRequest found = request;
    found.expected_config_digest = image.config_digest;
    auto existing = FindUnpacked(found, options);
    if (existing.ok()) {
      say("image " + request.reference + " is up to date (" + id + ")");
      return existing;
    }
  }
  RETURN_IF_ERROR(CleanStaleTemps(images_dir, id, say));
  ASSIGN_OR_RETURN(StagingDir staging, StagingDir::Create(images_dir, id));
  const std::string rootfs = staging.path() + "/rootfs";
  if (::mkdir(rootfs.c_str(), 0755) != 0) return base::ErrnoStatus("mkdir " + rootfs);

  ExtractLimits limits;
  limits.max_bytes = options.max_bytes;
  limits.keep_setuid = options.keep_setuid;
  ExtractStats stats;
  for (size_t i = 0; i < image.layers.size(); ++i) {
    std::string label = "layer " + std::to_string(i + 1) + " of " +
                        std::to_string(image.layers.size()) + " (" +
                        image.layers[i].digest.substr(0, 19) + ")";
    say("unpacking " + label + ", " + base::FormatSize(image.layers[i].size));
    RETURN_IF_ERROR(ApplyLayer(rootfs, image.layer_paths[i], label, limits, &stats)
                        .WithContext("unpack " + request.reference));
  }
  if (stats.dropped_devices > 0) {
    say("dropped " + std::to_string(stats.dropped_devices) +
        " device nodes (a box makes its own /dev)");
  }
  if (stats.cleared_setuid > 0) {
    say("cleared setuid/setgid bits of " + std::to_string(stats.cleared_setuid) +
        " files (--keep-setuid keeps them)");
  }
  RETURN_IF_ERROR(FinishTree(rootfs).WithContext("unpack " + request.reference));

  base::UniqueFd root(::open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root.valid()) return base::ErrnoStatus("open " + rootfs);
  BuildRecord record;
  record.info.config = image.config;
  RETURN_IF_ERROR(ResolveImageUser(root.get(), &record.info.config)
                      .WithContext("image " + request.reference + ": its User"));
  if (!record.info.config.working_dir.empty()) {
    record.info.config.working_dir_has_files =
        TreeDirHasEntries(root.get(), record.info.config.working_dir);
  }
  record.info.name = request.reference;
  record.info.id = id;
  record.info.source = "oci";
  record.info.reference = request.reference;
  record.info.digest = request.digest.empty() ? image.manifest_digest : request.digest;
  record.info.size_bytes = base::TreeSize(rootfs);
  record.info.built_at = NowIso8601();
  record.description = request.source_path.empty() ? "pulled from " + request.reference
                                                   : "imported from " + request.source_path;
  record.build_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RETURN_IF_ERROR(WriteManifest(staging.path() + "/manifest.json", record, ""));
  for (const auto& [path, mode] : {std::pair<std::string, mode_t>{staging.path(), 0755},
                                   {rootfs, 0755},
                                   {staging.path() + "/manifest.json", 0644}}) {
    if (::chmod(path.c_str(), mode) != 0) return base::ErrnoStatus("chmod " + path);
  }
  RETURN_IF_ERROR(staging.CommitTo(final_dir));
  RETURN_IF_ERROR(SetPointers(request, id));
  record.info.dir = final_dir;
  record.info.rootfs = final_dir + "/rootfs";
  record.info.store = request.home;
  say("image " + request.reference + " ready: " + id + ", " +
      base::FormatSize(record.info.size_bytes) + ", " + std::to_string(stats.entries) +
      " entries, " + std::to_string(static_cast<int>(record.build_seconds)) + " s");
  return record.info;
}

}  // namespace codebox::image
