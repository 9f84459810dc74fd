// What kind of archive `codebox image import` was given, read from its first entries.
#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "base/io.h"
#include "image/oci_reference.h"
#include "image/oci_unpack.h"

namespace codebox::image {
namespace {

constexpr int kMaxEntriesScanned = 100000;
constexpr size_t kMaxDockerManifestBytes = 1u << 20;

// Reads `path` as a tar (any compression), calling `visit` on each entry until it returns
// false; `data`, when asked for, is the entry's content (at most kMaxDockerManifestBytes).
Status ScanTar(const std::string& path,
               const std::function<bool(const std::string& name, struct archive* a)>& visit) {
  struct archive* a = archive_read_new();
  // Built-in filters only: "all" would run external programs (lrzip, lzop) on hostile bytes.
  archive_read_support_filter_gzip(a);
  archive_read_support_filter_zstd(a);
  archive_read_support_format_tar(a);
  if (archive_read_open_filename(a, path.c_str(), 1 << 16) != ARCHIVE_OK) {
    Status st =
        InvalidArgument(path + " is not a tar archive (" +
                        std::string(archive_error_string(a) ? archive_error_string(a) : "") + ")");
    archive_read_free(a);
    return st;
  }
  Status result = Status::Ok();
  struct archive_entry* entry = nullptr;
  for (int i = 0; i < kMaxEntriesScanned; ++i) {
    int rc = archive_read_next_header(a, &entry);
    if (rc == ARCHIVE_EOF) break;
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
      result = InvalidArgument(path + " is not a readable tar archive (" +
                               std::string(archive_error_string(a) ? archive_error_string(a) : "") +
                               ")");
      break;
    }
    const char* name = archive_entry_pathname(entry);
    std::string n = name != nullptr ? name : "";
    if (n.starts_with("./")) n = n.substr(2);
    if (!visit(n, a)) break;
  }
  archive_read_free(a);
  return result;
}

}  // namespace

StatusOr<std::string> DetectArchiveTransport(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return base::ErrnoStatus("import " + path);
  if (S_ISDIR(st.st_mode)) {
    if (::access((path + "/oci-layout").c_str(), R_OK) == 0) return std::string("oci");
    if (::access((path + "/manifest.json").c_str(), R_OK) == 0) {
      return InvalidArgument(path + " looks like an unpacked docker-save archive; give the .tar");
    }
    return InvalidArgument(path + " is a directory without an oci-layout file: not an OCI layout");
  }
  if (!S_ISREG(st.st_mode)) return InvalidArgument(path + " is not a file or directory");
  bool oci = false, docker = false;
  RETURN_IF_ERROR(ScanTar(path, [&](const std::string& name, struct archive*) {
    if (name == "oci-layout") oci = true;
    if (name == "manifest.json") docker = true;
    return !oci;
  }));
  if (oci) return std::string("oci-archive");
  if (docker) return std::string("docker-archive");
  return InvalidArgument(path +
                         " is a tar archive but neither an OCI archive (no oci-layout) nor a "
                         "docker-save archive (no manifest.json)");
}

namespace {

// The content of the tar member `member` (at most kMaxDockerManifestBytes), or "".
std::string ReadTarMember(const std::string& archive, const std::string& member) {
  std::string data;
  (void)ScanTar(archive, [&](const std::string& name, struct archive* a) {
    if (name != member) return true;
    char buf[65536];
    for (la_ssize_t n; (n = archive_read_data(a, buf, sizeof buf)) > 0;) {
      data.append(buf, static_cast<size_t>(n));
      if (data.size() > kMaxDockerManifestBytes) {
        data.clear();
        break;
      }
    }
    return false;
  });
  return data;
}

// An OCI index's org.opencontainers.image.ref.name when it is a whole reference ("app:1",
// "ghcr.io/org/app"); a bare tag ("1", "latest"), which is what most tools write, is not.
std::string IndexImageName(const std::string& index_json) {
  nlohmann::json j = nlohmann::json::parse(index_json, nullptr, false);
  if (!j.is_object() || !j.contains("manifests") || !j["manifests"].is_array()) return "";
  for (const auto& m : j["manifests"]) {
    if (!m.is_object() || !m.contains("annotations") || !m["annotations"].is_object()) continue;
    auto name = m["annotations"].find("org.opencontainers.image.ref.name");
    if (name == m["annotations"].end() || !name->is_string()) continue;
    std::string n = name->get<std::string>();
    if (n.find_first_of(":/@") != std::string::npos && ParseImageReference(n).ok()) return n;
  }
  return "";
}

// The first RepoTags entry of a docker-save manifest.json.
std::string DockerImageName(const std::string& manifest_json) {
  nlohmann::json j = nlohmann::json::parse(manifest_json, nullptr, false);
  if (!j.is_array() || j.size() != 1 || !j[0].is_object()) return "";
  auto tags = j[0].find("RepoTags");
  if (tags == j[0].end() || !tags->is_array() || tags->empty() || !(*tags)[0].is_string()) {
    return "";
  }
  std::string n = (*tags)[0].get<std::string>();
  return ParseImageReference(n).ok() ? n : "";
}

}  // namespace

std::string ArchiveImageName(const std::string& path, const std::string& transport) {
  if (transport == "docker-archive") return DockerImageName(ReadTarMember(path, "manifest.json"));
  if (transport == "oci-archive") return IndexImageName(ReadTarMember(path, "index.json"));
  auto index = base::ReadFile(path + "/index.json");
  return index.ok() ? IndexImageName(*index) : "";
}

}  // namespace codebox::image
