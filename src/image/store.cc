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
#include "image/oci_import.h"
#include "image/oci_reference.h"
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
  return ReadPointer(ByNameDir(home), name);
}

// Drops the pointers in `dir` that point at one of `doomed`.
void DropPointers(const std::string& dir, const std::vector<std::string>& doomed) {
  for (const std::string& link : base::ListDirectory(dir)) {
    if (link == "." || link == "..") continue;
    std::string id = ReadPointer(dir, link);
    if (std::find(doomed.begin(), doomed.end(), id) != doomed.end()) {
      ::unlink((dir + "/" + link).c_str());
    }
  }
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
  if (record.info.source == "oci") {
    const ImageConfig& c = record.info.config;
    nlohmann::json config = {{"env", c.env},
                             {"working_dir", c.working_dir},
                             {"user", c.user},
                             {"home", c.home},
                             {"working_dir_has_files", c.working_dir_has_files}};
    if (c.uid) config["uid"] = *c.uid;
    if (c.gid) config["gid"] = *c.gid;
    j["source"] = "oci";
    j["reference"] = record.info.reference;
    j["digest"] = record.info.digest;
    j["config"] = config;
  }
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
    r.info.source = j.value("source", "recipe");
    if (r.info.source == "oci") {
      r.info.reference = j.value("reference", "");
      r.info.digest = j.value("digest", "");
      const nlohmann::json config = j.value("config", nlohmann::json::object());
      ImageConfig& c = r.info.config;
      c.env = config.value("env", std::vector<std::string>{});
      c.working_dir = config.value("working_dir", "");
      c.user = config.value("user", "");
      c.home = config.value("home", "");
      c.working_dir_has_files = config.value("working_dir_has_files", false);
      if (config.contains("uid")) c.uid = config["uid"].get<uint32_t>();
      if (config.contains("gid")) c.gid = config["gid"].get<uint32_t>();
    }
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

std::string ReadPointer(const std::string& pointer_dir, const std::string& name) {
  char buf[PATH_MAX];
  std::string link = pointer_dir + "/" + name;
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string target(buf, static_cast<size_t>(n));
  return target.substr(target.rfind('/') + 1);
}

Status SetNamePointer(const std::string& home, const std::string& name, const std::string& id) {
  return SetPointer(ByNameDir(home), name, id);
}

Status SetPointer(const std::string& pointer_dir, const std::string& name, const std::string& id) {
  RETURN_IF_ERROR(base::MakeDirs(pointer_dir));
  if (::chmod(pointer_dir.c_str(), 0755) != 0) return base::ErrnoStatus("chmod " + pointer_dir);
  std::string link = pointer_dir + "/" + name;
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
  if (IsOciImageName(name)) {
    // A plain word without a recipe may still name a recipe's earlier build (by-name/).
    bool built = false;
    for (const base::ImageStore& store : stores)
      built = built || !NamePointer(store.path, name).empty();
    if (!IsValidImageName(name) || !built) return FindOciImage(stores, name);
  }
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
  std::string canonical;  // NAME as an OCI reference ("python:3.12-slim" -> docker.io/...)
  if (auto ref = ParseImageReference(name); ref.ok()) canonical = ref->Canonical();
  for (const ImageInfo& image : ListImages(home)) {
    bool oci_match = !canonical.empty() && image.source == "oci" &&
                     (image.name == canonical || image.reference == canonical ||
                      ReadPointer(ByRefDir(home), RefPointerName(canonical)) == image.id);
    if (image.name == name || image.id == name || oci_match) doomed.push_back(image.id);
  }
  if (doomed.empty()) return NotFound("no built image named '" + name + "'");
  for (const std::string& id : doomed) {
    // Rename first: a reader never sees a half-deleted image under its real name.
    std::string dir = ImagesDir(home) + "/" + id;
    std::string trash = ImagesDir(home) + "/.tmp-rm-" + id + "-" + std::to_string(::getpid());
    if (::rename(dir.c_str(), trash.c_str()) != 0) return base::ErrnoStatus("rename " + dir);
    RETURN_IF_ERROR(base::RemoveTreeAndMounts(trash).WithContext("remove image " + id));
  }
  // Drop pointers that now point nowhere.
  DropPointers(ByNameDir(home), doomed);
  DropPointers(ByRefDir(home), doomed);
  return Status::Ok();
}

}  // namespace codebox::image
