// The image store: lookups, listing, removal and the manifest format.
#include "image/store.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "base/io.h"
#include "image/recipe.h"
#include "image/store_internal.h"

namespace codebox::image {
namespace {

constexpr int kManifestFormat = 1;

std::string NotBuiltMessage(const std::string& name) {
  return "image '" + name + "' is not built; run: codebox image build " + name;
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

StatusOr<ImageInfo> FindImage(const std::string& home, const std::string& name) {
  if (!IsValidImageName(name)) {
    return InvalidArgument("bad image name '" + name + "' (use a-z, 0-9, '-', '_', '.')");
  }
  auto recipe = LoadRecipe(name);
  std::string id;
  if (recipe.ok()) {
    id = ImageId(*recipe);
  } else {
    // No recipe here (an installed codebox without recipes, or one removed since): the
    // newest build of that name still serves; without one, say which recipes exist.
    id = NamePointer(home, name);
    if (id.empty()) return recipe.status();
  }
  std::string dir = ImagesDir(home) + "/" + id;
  if (!base::PathExists(dir + "/manifest.json")) {
    std::string message = NotBuiltMessage(name);
    std::string old = NamePointer(home, name);
    if (!old.empty() && old != id) message += " (its recipe changed since build " + old + ")";
    return NotFound(message);
  }
  auto record = ReadManifest(dir);
  if (!record.ok()) return record.status().WithContext("image " + name);
  return record->info;
}

std::vector<ImageInfo> ListImages(const std::string& home) {
  std::vector<ImageInfo> images;
  for (const std::string& id : ImageDirs(home)) {
    auto record = ReadManifest(ImagesDir(home) + "/" + id);
    if (record.ok()) images.push_back(record->info);
  }
  std::sort(images.begin(), images.end(), [](const ImageInfo& a, const ImageInfo& b) {
    return a.name != b.name ? a.name < b.name : a.built_at > b.built_at;
  });
  return images;
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
