#include "image/oci_layout.h"

#include <sys/stat.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "base/io.h"
#include "base/json_fields.h"
#include "base/text.h"
#include "image/oci_reference.h"
#include "base/sha256.h"

namespace codebox::image {
namespace {

using nlohmann::json;

constexpr size_t kMaxEnvEntries = 1024;
constexpr size_t kMaxEnvBytes = 256u << 10;  // a box's whole environment (BoxOptions)
constexpr size_t kMaxUserLength = 256;

bool IsIndexType(const std::string& t) {
  return t == "application/vnd.oci.image.index.v1+json" ||
         t == "application/vnd.docker.distribution.manifest.list.v2+json";
}
bool IsManifestType(const std::string& t) {
  return t == "application/vnd.oci.image.manifest.v1+json" ||
         t == "application/vnd.docker.distribution.manifest.v2+json";
}
bool IsConfigType(const std::string& t) {
  return t == "application/vnd.oci.image.config.v1+json" ||
         t == "application/vnd.docker.container.image.v1+json";
}
bool IsLayerType(const std::string& t) {
  for (const char* suffix : {".tar", ".tar+gzip", ".tar+zstd", ".diff.tar.gzip"}) {
    if (t.ends_with(suffix)) return true;
  }
  return false;
}

StatusOr<json> ParseObject(std::string_view text, const std::string& what) {
  if (text.size() > kMaxJsonBlobBytes) {
    return InvalidArgument(what + " is " + std::to_string(text.size()) + " bytes, more than " +
                           std::to_string(kMaxJsonBlobBytes) + " allowed");
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return ProtocolError(what + " is not a JSON object");
  return j;
}

// A string member, or "" when absent; an error when present with another type.
StatusOr<std::string> StringField(const json& j, const char* key, const std::string& what) {
  return base::JsonFields(j, what).String(key, "");
}

StatusOr<OciDescriptor> ParseDescriptor(const json& j, const std::string& what) {
  if (!j.is_object()) return ProtocolError(what + " is not a JSON object");
  OciDescriptor d;
  ASSIGN_OR_RETURN(d.media_type, StringField(j, "mediaType", what));
  ASSIGN_OR_RETURN(d.digest, StringField(j, "digest", what));
  if (!IsSha256Digest(d.digest)) {
    return ProtocolError(what + ": digest '" + d.digest.substr(0, 80) +
                         "' is not sha256: and 64 hex digits");
  }
  ASSIGN_OR_RETURN(int64_t size,
                   base::JsonFields(j, what).Int("size", 0, std::numeric_limits<int64_t>::max()));
  d.size = static_cast<uint64_t>(size);
  return d;
}

const json* ArrayField(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_array() ? &*it : nullptr;
}

// "/srv/app" from "srv//app/." and the like; ".." is refused rather than resolved.
StatusOr<std::string> CleanAbsolutePath(const std::string& path) {
  std::string out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(start, end - start);
    if (part == "..") return InvalidArgument("has a '..' component");
    if (!part.empty() && part != ".") out += "/" + part;
    start = end + 1;
  }
  return out.empty() ? "/" : out;
}

// Reads the blob `d` names from the layout, checking its size and digest.
StatusOr<std::string> ReadJsonBlob(const std::string& dir, const OciDescriptor& d,
                                   const std::string& what) {
  if (d.size > kMaxJsonBlobBytes) {
    return InvalidArgument(what + " is " + std::to_string(d.size) + " bytes, more than " +
                           std::to_string(kMaxJsonBlobBytes) + " allowed");
  }
  std::string path = dir + "/blobs/sha256/" + d.digest.substr(7);
  ASSIGN_OR_RETURN(std::string data, base::ReadFile(path));
  if (data.size() != d.size) {
    return ProtocolError(what + " " + d.digest + " is " + std::to_string(data.size()) +
                         " bytes, not the " + std::to_string(d.size) + " its descriptor says");
  }
  if ("sha256:" + base::Sha256Hex(data) != d.digest) {
    return ProtocolError(what + ": digest mismatch: the blob's content is not " + d.digest);
  }
  return data;
}

Status CheckLayerBlob(const std::string& path, const OciDescriptor& d, const std::string& what) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return base::ErrnoStatus(what + ": " + path);
  if (!S_ISREG(st.st_mode)) return ProtocolError(what + ": " + path + " is not a regular file");
  if (static_cast<uint64_t>(st.st_size) != d.size) {
    return ProtocolError(what + " is " + std::to_string(st.st_size) + " bytes, not the " +
                         std::to_string(d.size) + " its descriptor says");
  }
  ASSIGN_OR_RETURN(std::string hex, base::Sha256FileHex(path));
  if ("sha256:" + hex != d.digest) {
    return ProtocolError(what + ": digest mismatch: the blob's content is sha256:" + hex +
                         ", not " + d.digest);
  }
  return Status::Ok();
}

}  // namespace

uint64_t OciManifest::LayerBytes() const {
  uint64_t total = 0;
  for (const OciDescriptor& d : layers) total += d.size;
  return total;
}

StatusOr<bool> IsImageIndex(std::string_view text) {
  ASSIGN_OR_RETURN(json j, ParseObject(text, "the manifest"));
  ASSIGN_OR_RETURN(std::string type, StringField(j, "mediaType", "the manifest"));
  if (IsIndexType(type)) return true;
  if (IsManifestType(type)) return false;
  // mediaType is optional in OCI documents: the shape tells.
  if (type.empty() && ArrayField(j, "manifests") != nullptr) return true;
  if (type.empty() && ArrayField(j, "layers") != nullptr) return false;
  if (type.find("manifest.v1") != std::string::npos || j.contains("fsLayers")) {
    return InvalidArgument(
        "the image uses Docker's schema 1 manifest, which codebox does not read; push it again "
        "with a current docker or skopeo");
  }
  return ProtocolError("the manifest's media type '" + type.substr(0, 100) +
                       "' is not an OCI or Docker image manifest or index");
}

StatusOr<OciDescriptor> SelectPlatform(std::string_view text) {
  ASSIGN_OR_RETURN(json j, ParseObject(text, "the image index"));
  const json* manifests = ArrayField(j, "manifests");
  if (manifests == nullptr) return ProtocolError("the image index has no \"manifests\" array");
  std::set<std::string> seen;
  for (const json& entry : *manifests) {
    ASSIGN_OR_RETURN(OciDescriptor d, ParseDescriptor(entry, "an image index entry"));
    auto platform = entry.find("platform");
    if (platform == entry.end() || !platform->is_object()) continue;
    ASSIGN_OR_RETURN(std::string os, StringField(*platform, "os", "a platform"));
    ASSIGN_OR_RETURN(std::string arch, StringField(*platform, "architecture", "a platform"));
    if (os == kPlatformOs && arch == kPlatformArch && !IsIndexType(d.media_type)) return d;
    if (seen.size() < 20) seen.insert(os.substr(0, 20) + "/" + arch.substr(0, 20));
  }
  std::string list;
  for (const std::string& p : seen) list += (list.empty() ? "" : ", ") + p;
  return NotFound(std::string("the image has no ") + kPlatformOs + "/" + kPlatformArch +
                  " variant (it has: " + (list.empty() ? "none named" : list) + ")");
}

StatusOr<OciManifest> ParseManifest(std::string_view text) {
  ASSIGN_OR_RETURN(json j, ParseObject(text, "the image manifest"));
  auto config = j.find("config");
  if (config == j.end()) return ProtocolError("the image manifest has no \"config\"");
  OciManifest m;
  ASSIGN_OR_RETURN(m.config, ParseDescriptor(*config, "the manifest's config"));
  if (!m.config.media_type.empty() && !IsConfigType(m.config.media_type)) {
    return InvalidArgument("the manifest's config is '" + m.config.media_type.substr(0, 100) +
                           "', not an image config: this is not a container image");
  }
  const json* layers = ArrayField(j, "layers");
  if (layers == nullptr) return ProtocolError("the image manifest has no \"layers\" array");
  if (layers->size() > kMaxLayers) {
    return InvalidArgument("the image has " + std::to_string(layers->size()) +
                           " layers, more than " + std::to_string(kMaxLayers));
  }
  for (const json& entry : *layers) {
    std::string what = "layer " + std::to_string(m.layers.size() + 1);
    ASSIGN_OR_RETURN(OciDescriptor d, ParseDescriptor(entry, what));
    if (!IsLayerType(d.media_type)) {
      return InvalidArgument(what + " has media type '" + d.media_type.substr(0, 100) +
                             "', not a tar layer");
    }
    m.layers.push_back(std::move(d));
  }
  return m;
}

StatusOr<ImageConfig> ParseImageConfig(std::string_view text) {
  ASSIGN_OR_RETURN(json j, ParseObject(text, "the image config"));
  ASSIGN_OR_RETURN(std::string os, StringField(j, "os", "the image config"));
  ASSIGN_OR_RETURN(std::string arch, StringField(j, "architecture", "the image config"));
  if ((!os.empty() && os != kPlatformOs) || (!arch.empty() && arch != kPlatformArch)) {
    return InvalidArgument("the image is for " + os.substr(0, 20) + "/" + arch.substr(0, 20) +
                           "; codebox runs " + kPlatformOs + "/" + kPlatformArch + " images");
  }
  ImageConfig c;
  auto run = j.find("config");
  if (run == j.end() || run->is_null()) return c;
  if (!run->is_object()) return ProtocolError("the image config's \"config\" is not an object");
  if (const json* env = ArrayField(*run, "Env")) {
    if (env->size() > kMaxEnvEntries) {
      return InvalidArgument("the image config sets " + std::to_string(env->size()) +
                             " environment variables, more than " + std::to_string(kMaxEnvEntries));
    }
    size_t total = 0;
    for (const json& e : *env) {
      if (!e.is_string()) return ProtocolError("the image config's Env has a non-string entry");
      std::string entry = e.get<std::string>();
      size_t eq = entry.find('=');
      if (eq == 0 || eq == std::string::npos || entry.find('\0') != std::string::npos) {
        return InvalidArgument("the image config's Env entry '" + entry.substr(0, 80) +
                               "' is not NAME=VALUE");
      }
      total += entry.size() + 1;
      if (total > kMaxEnvBytes) {
        return InvalidArgument("the image config's Env is larger than " +
                               std::to_string(kMaxEnvBytes) + " bytes");
      }
      c.env.push_back(std::move(entry));
    }
  }
  ASSIGN_OR_RETURN(std::string workdir, StringField(*run, "WorkingDir", "the image config"));
  if (!workdir.empty()) {
    if (workdir.size() >= 4096 || workdir.find('\0') != std::string::npos) {
      return InvalidArgument("the image config's WorkingDir is not a usable path");
    }
    auto clean = CleanAbsolutePath(workdir);  // relative: from "/", as the OCI spec says
    if (!clean.ok()) {
      return InvalidArgument("the image config's WorkingDir '" + workdir.substr(0, 100) + "' " +
                             clean.status().message());
    }
    if (*clean != "/") c.working_dir = *clean;
  }
  ASSIGN_OR_RETURN(c.user, StringField(*run, "User", "the image config"));
  if (c.user.size() > kMaxUserLength ||
      c.user.find_first_of(std::string("\0\n", 2)) != std::string::npos) {
    return InvalidArgument("the image config's User is not a user name or id");
  }
  return c;
}

StatusOr<OciImage> ReadOciLayout(const std::string& dir, uint64_t max_layer_bytes) {
  ASSIGN_OR_RETURN(std::string index_text, base::ReadFile(dir + "/index.json"));
  ASSIGN_OR_RETURN(json index, ParseObject(index_text, "the layout's index.json"));
  const json* manifests = ArrayField(index, "manifests");
  if (manifests == nullptr || manifests->size() != 1) {
    return InvalidArgument("the layout's index.json must list exactly one image");
  }
  ASSIGN_OR_RETURN(OciDescriptor top, ParseDescriptor(manifests->front(), "the layout's image"));
  ASSIGN_OR_RETURN(std::string text, ReadJsonBlob(dir, top, "the image manifest"));
  ASSIGN_OR_RETURN(bool is_index, IsImageIndex(text));
  if (is_index) {
    ASSIGN_OR_RETURN(top, SelectPlatform(text));
    ASSIGN_OR_RETURN(text, ReadJsonBlob(dir, top, "the image manifest"));
    ASSIGN_OR_RETURN(is_index, IsImageIndex(text));
    if (is_index) return InvalidArgument("the image index points at another index");
  }
  ASSIGN_OR_RETURN(OciManifest manifest, ParseManifest(text));
  if (manifest.LayerBytes() > max_layer_bytes) {
    return InvalidArgument("the image has " + base::FormatSize(manifest.LayerBytes()) +
                           " of compressed layers, more than the limit of " +
                           base::FormatSize(max_layer_bytes) + " (--max-size)");
  }
  OciImage image;
  image.manifest_digest = top.digest;
  image.config_digest = manifest.config.digest;
  ASSIGN_OR_RETURN(std::string config_text, ReadJsonBlob(dir, manifest.config, "the image config"));
  ASSIGN_OR_RETURN(image.config, ParseImageConfig(config_text));
  for (size_t i = 0; i < manifest.layers.size(); ++i) {
    const OciDescriptor& d = manifest.layers[i];
    std::string path = dir + "/blobs/sha256/" + d.digest.substr(7);
    RETURN_IF_ERROR(CheckLayerBlob(path, d, "layer " + std::to_string(i + 1)));
    image.layer_paths.push_back(path);
  }
  image.layers = std::move(manifest.layers);
  return image;
}

}  // namespace codebox::image
