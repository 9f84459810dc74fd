// The image store: lookups, listing, removal and the manifest format.
#include "image/store.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "base/io.h"
#include "image/recipe.h"
#include "image/store_internal.h"

namespace codebox::image {
namespace {

constexpr int kManifestFormat = 1;

constexpr char kNeedsRoot[] =
    "building needs root: debootstrap creates device nodes and files owned by other users";

std::string JoinStorePaths(const std::vector<base::ImageStore>& stores) {
  std::string out;
  for (const base::ImageStore& store : stores) out += (out.empty() ? "" : " or ") + store.path;
  return out;
}

// The id images/by-name/<name> points at, or "" when there is no pointer.
std::string NamePointer(const std::string& home, const std::string& name) {
  char buf[PATH_MAX];
  std::string link = ByNameDir(home) + "/" + name;
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string target(buf, static_cast<size_t>(n));
  return target.substr(target.rfind('/') + 1);
}

std::vector<std::string> ImageDirs(const std::string& home) {
  std::vector<std::string> ids;
  DIR* d = ::opendir(ImagesDir(home).c_str());
  if (d == nullptr) return ids;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    // Ids are 16 hex digits; this skips by-name/, .tmp-* and anything else found here.
    if (name.size() == 16 && name.find_first_not_of("0123456789abcdef") == std::string::npos) {
      ids.push_back(name);
    }
  }
  ::closedir(d);
  return ids;
}

}  // namespace

Status WriteManifest(const std::string& path, const BuildRecord& record,
                     const std::string& recipe_text) {
  nlohmann::json packages = nlohmann::json::object();
  for (const auto& [pkg, version] : record.packages) packages[pkg] = version;
  nlohmann::json j = {
      {"format", kManifestFormat},
      {"name", record.info.name},
      {"id", record.info.id},
      {"description", record.description},
      {"builder", kBuilderVersion},
      {"recipe", recipe_text},
      {"mirror", record.mirror},
      {"size_bytes", record.info.size_bytes},
      {"built_at", record.info.built_at},
      {"build_seconds", record.build_seconds},
      {"packages", packages},
  };
  return base::WriteFile(path, j.dump(2) + "\n", /*atomic=*/true);
}

StatusOr<BuildRecord> ReadManifest(const std::string& image_dir) {
  auto text = base::ReadFile(image_dir + "/manifest.json");
  if (!text.ok()) return text.status().WithContext("read manifest");
  // nlohmann throws on malformed input; keep it inside this adapter.
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return ProtocolError("manifest " + image_dir + "/manifest.json is not a JSON object");
  }
  BuildRecord r;
  try {
    r.info.name = j.value("name", "");
    r.info.id = j.value("id", "");
    r.info.size_bytes = j.value("size_bytes", uint64_t{0});
    r.info.built_at = j.value("built_at", "");
    r.description = j.value("description", "");
    r.mirror = j.value("mirror", "");
    r.build_seconds = j.value("build_seconds", 0.0);
    if (j.contains("packages") && j["packages"].is_object()) {
      for (const auto& [pkg, version] : j["packages"].items()) {
        if (version.is_string()) r.packages.emplace_back(pkg, version.get<std::string>());
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return ProtocolError("manifest " + image_dir + "/manifest.json: " + e.what());
  }
  r.info.dir = image_dir;
  r.info.rootfs = image_dir + "/rootfs";
  return r;
}

Status SetNamePointer(const std::string& home, const std::string& name, const std::string& id) {
  RETURN_IF_ERROR(base::MakeDirs(ByNameDir(home)));
  if (::chmod(ByNameDir(home).c_str(), 0755) != 0)
    return base::ErrnoStatus("chmod " + ByNameDir(home));
  std::string link = ByNameDir(home) + "/" + name;
  std::string tmp = link + ".tmp-" + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  if (::symlink(("../" + id).c_str(), tmp.c_str()) != 0) return base::ErrnoStatus("symlink " + tmp);
  if (::rename(tmp.c_str(), link.c_str()) != 0) {
    Status st = base::ErrnoStatus("rename " + tmp + " to " + link);
    ::unlink(tmp.c_str());
    return st;
  }
  return Status::Ok();
}

std::string BuildCommandHint(const std::string& name, const std::vector<base::ImageStore>& stores,
                             bool root) {
  if (!stores.empty() && stores.front().kind == base::ImageStore::Kind::kExplicit) {
    std::string build = "CODEBOX_HOME=" + stores.front().path + " codebox image build " + name;
    return root ? build : "sudo env " + build + " (" + kNeedsRoot + ")";
  }
  if (root) return "codebox image build " + name;
  return "sudo codebox image build " + name + " (" + kNeedsRoot + "; the image goes to " +
         base::kSystemStore + ", where every user's boxes find it)";
}

std::string MissingImageHint(const std::string& name, const std::vector<base::ImageStore>& stores,
                             bool root) {
  std::string where =
      root && !stores.empty() && stores.front().kind != base::ImageStore::Kind::kExplicit
          ? ""
          : " in " + JoinStorePaths(stores);
  return "image '" + name + "' is not built" + where +
         "; run: " + BuildCommandHint(name, stores, root);
}

std::string UnreadableImageHint(const std::string& name, const std::string& store,
                                const std::string& image_dir, const std::string& path, int err) {
  return "image '" + name + "' is in the store " + store + " but " + path +
         " cannot be read by uid " + std::to_string(::geteuid()) + " (" + std::strerror(err) +
         "); make it readable for every user: sudo chmod a+rX " + store + " " + ImagesDir(store) +
         " " + image_dir + " " + image_dir + "/rootfs " + image_dir + "/manifest.json";
}

StatusOr<ImageInfo> FindImage(const std::vector<base::ImageStore>& stores,
                              const std::string& name) {
  if (!IsValidImageName(name)) {
    return InvalidArgument("bad image name '" + name + "' (use a-z, 0-9, '-', '_', '.')");
  }
  auto recipe = LoadRecipe(name);
  std::string old;    // a build of an older recipe, for the message
  Status unreadable;  // the first store that has the image but cannot be read
  bool any_pointer = false;
  for (const base::ImageStore& store : stores) {
    std::string pointer = NamePointer(store.path, name);
    any_pointer = any_pointer || !pointer.empty();
    // No recipe here (an installed codebox without recipes, or one removed since): the
    // newest build of that name still serves.
    std::string id = recipe.ok() ? ImageId(*recipe) : pointer;
    if (id.empty()) continue;
    if (!pointer.empty() && pointer != id && old.empty()) old = pointer;
    std::string dir = ImagesDir(store.path) + "/" + id;
    std::string manifest = dir + "/manifest.json";
    if (::access(manifest.c_str(), R_OK) != 0) {
      // EACCES on the file or on a directory above it: there may well be an image there.
      if (errno == EACCES && unreadable.ok()) {
        unreadable = PermissionDenied(UnreadableImageHint(name, store.path, dir, manifest, errno));
      }
      continue;
    }
    auto record = ReadManifest(dir);
    if (!record.ok()) return record.status().WithContext("image " + name);
    record->info.store = store.path;
    record->info.store_kind = store.kind;
    return record->info;
  }
  if (!recipe.ok() && !any_pointer) return recipe.status();  // says which recipes exist
  if (!unreadable.ok()) return unreadable;
  std::string message = MissingImageHint(name, stores, ::geteuid() == 0);
  if (!old.empty()) message += " (its recipe changed since build " + old + ")";
  return NotFound(message);
}

StatusOr<ImageInfo> FindImage(const std::string& home, const std::string& name) {
  return FindImage(std::vector<base::ImageStore>{{home, base::ImageStore::Kind::kExplicit}}, name);
}

std::vector<ImageInfo> ListImages(const std::string& home) {
  std::vector<ImageInfo> images;
  for (const std::string& id : ImageDirs(home)) {
    auto record = ReadManifest(ImagesDir(home) + "/" + id);
    if (!record.ok()) continue;
    record->info.store = home;
    images.push_back(record->info);
  }
  std::sort(images.begin(), images.end(), [](const ImageInfo& a, const ImageInfo& b) {
    return a.name != b.name ? a.name < b.name : a.built_at > b.built_at;
  });
  return images;
}

std::vector<ImageInfo> ListImages(const std::vector<base::ImageStore>& stores) {
  std::vector<ImageInfo> all;
  for (const base::ImageStore& store : stores) {
    for (ImageInfo& info : ListImages(store.path)) {
      info.store_kind = store.kind;
      all.push_back(std::move(info));
    }
  }
  return all;
}

Status RemoveImage(const std::string& home, const std::string& name) {
  // NAME removes every build of that name; an id removes that one build.
  std::vector<std::string> doomed;
  for (const ImageInfo& image : ListImages(home)) {
    if (image.name == name || image.id == name) doomed.push_back(image.id);
  }
  if (doomed.empty()) return NotFound("no built image named '" + name + "'");
  for (const std::string& id : doomed) {
    // Rename first: a reader never sees a half-deleted image under its real name.
    std::string dir = ImagesDir(home) + "/" + id;
    std::string trash = ImagesDir(home) + "/.tmp-rm-" + id + "-" + std::to_string(::getpid());
    if (::rename(dir.c_str(), trash.c_str()) != 0) return base::ErrnoStatus("rename " + dir);
    RETURN_IF_ERROR(base::RemoveTreeAndMounts(trash).WithContext("remove image " + id));
  }
  // Drop name pointers that now point nowhere.
  if (DIR* d = ::opendir(ByNameDir(home).c_str())) {
    std::vector<std::string> links;
    while (struct dirent* e = ::readdir(d)) links.emplace_back(e->d_name);
    ::closedir(d);
    for (const std::string& link : links) {
      if (link == "." || link == "..") continue;
      std::string id = NamePointer(home, link);
      if (std::find(doomed.begin(), doomed.end(), id) != doomed.end()) {
        ::unlink((ByNameDir(home) + "/" + link).c_str());
      }
    }
  }
  return Status::Ok();
}

}  // namespace codebox::image
