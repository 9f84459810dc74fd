// PullImage / ImportImage: skopeo into a temp OCI layout, then oci_unpack.cc into the store.
#include "image/oci_import.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/fs.h"
#include "base/io.h"
#include "base/subprocess.h"
#include "base/text.h"
#include "image/oci_layout.h"
#include "image/oci_reference.h"
#include "image/oci_unpack.h"
#include "image/recipe.h"
#include "base/sha256.h"
#include "image/store_internal.h"

namespace codebox::image {
namespace {

std::string SkopeoProgram(const PullOptions& options) {
  if (!options.skopeo.empty()) return options.skopeo;
  if (const char* v = std::getenv("CODEBOX_SKOPEO"); v != nullptr && *v != '\0') return v;
  return "skopeo";
}

// The registry auth file skopeo should read, as podman and skopeo look for it; "" for none.
std::string DefaultAuthFile() {
  if (const char* v = std::getenv("REGISTRY_AUTH_FILE"); v != nullptr && *v != '\0') return v;
  std::vector<std::string> candidates;
  if (const char* run = std::getenv("XDG_RUNTIME_DIR"); run != nullptr && *run != '\0') {
    candidates.push_back(std::string(run) + "/containers/auth.json");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    candidates.push_back(std::string(home) + "/.config/containers/auth.json");
    candidates.push_back(std::string(home) + "/.docker/config.json");
  }
  for (const std::string& path : candidates) {
    if (::access(path.c_str(), R_OK) == 0) return path;
  }
  return "";
}

// skopeo's own words for why it failed (the msg="..." of its last fatal log line), with what
// to do for the failures a user can fix; else how it ended and its last lines.
std::string ExplainSkopeoFailure(const base::RunResult& r) {
  std::string msg;
  for (const std::string& line : r.tail) {
    size_t at = line.find("msg=\"");
    if (at == std::string::npos || line.find("level=fatal") == std::string::npos) continue;
    msg.clear();
    for (size_t i = at + 5; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) ++i;  // logfmt escapes \" and \\ like this
      msg += line[i];
    }
  }
  if (msg.empty()) return r.Describe();
  struct Hint {
    const char* says;
    const char* hint;
  };
  static constexpr Hint kHints[] = {
      {"HTTP response to HTTPS client",
       "the registry speaks plain HTTP: pull with --insecure if it is on this host or a private "
       "address"},
      {"manifest unknown", "the registry has no such image or tag"},
      {"name unknown", "the registry has no such repository"},
      {"unauthorized", "log in: --creds USER:PASSWORD, or a registry auth file (--authfile)"},
      {"authentication required",
       "log in: --creds USER:PASSWORD, or a registry auth file (--authfile)"},
      {"denied", "the registry refused access: check the name and the credentials"},
      {"x509", "the registry's TLS certificate is not trusted here: set SSL_CERT_FILE to its CA"},
      {"connection refused", "nothing listens at the registry's address"},
      {"no such host", "the registry's host name does not resolve"},
      {"i/o timeout", "the registry did not answer in time"},
      {"digest",
       "the content does not match its digest: the registry or archive is corrupt or "
       "was tampered with"},
  };
  for (const Hint& h : kHints) {
    if (msg.find(h.says) != std::string::npos) return msg + " (" + h.hint + ")";
  }
  return msg;
}

// One pull's or import's scratch: skopeo's signature policy (codebox checks digests, not
// signatures: see docs/images.md), credentials, its temp files and the layout it writes.
class SkopeoSession {
 public:
  static StatusOr<SkopeoSession> Create(const std::string& images_dir, const PullOptions& options,
                                        const std::string& registry) {
    static std::atomic<int> counter{0};
    ASSIGN_OR_RETURN(StagingDir dir,
                     StagingDir::Create(images_dir, "oci-" + std::to_string(++counter)));
    SkopeoSession s(std::move(dir), options);
    RETURN_IF_ERROR(base::WriteFile(s.dir_.path() + "/policy.json",
                                    R"({"default": [{"type": "insecureAcceptAnything"}]})"));
    RETURN_IF_ERROR(base::MakeDirs(s.dir_.path() + "/tmp", 0700));
    if (!options.creds.empty()) {
      // An auth file of our own (mode 0600), so the password never appears in an argv.
      nlohmann::json auth = {
          {"auths", {{registry, {{"auth", base::EncodeBase64(options.creds)}}}}}};
      s.authfile_ = s.dir_.path() + "/auth.json";
      RETURN_IF_ERROR(base::WriteFile(s.authfile_, auth.dump()));
      if (::chmod(s.authfile_.c_str(), 0600) != 0) return base::ErrnoStatus("chmod auth file");
    } else {
      s.authfile_ = options.authfile.empty() ? DefaultAuthFile() : options.authfile;
    }
    return s;
  }

  const std::string& dir() const { return dir_.path(); }
  std::string layout() const { return dir_.path() + "/layout"; }

  // `skopeo inspect --raw docker://REF`: the manifest bytes, at most kMaxJsonBlobBytes.
  StatusOr<std::string> InspectRaw(const std::string& canonical) {
    std::vector<std::string> argv = {"inspect", "--raw", "--retry-times", "2"};
    if (options_.insecure) argv.push_back("--tls-verify=false");
    if (!authfile_.empty()) argv.insert(argv.end(), {"--authfile", authfile_});
    argv.push_back("docker://" + canonical);
    ASSIGN_OR_RETURN(base::RunResult r, Run(argv, /*capture=*/true, nullptr));
    if (r.out_truncated) {
      return InvalidArgument("the registry's manifest for " + canonical + " is larger than " +
                             std::to_string(kMaxJsonBlobBytes) + " bytes");
    }
    return r.out;
  }

  // `skopeo copy SOURCE oci:LAYOUT:image`: fetches and verifies every blob.
  Status Copy(const std::string& source, bool from_registry, const Progress& progress) {
    std::vector<std::string> argv = {"copy", "--retry-times", "2"};
    if (from_registry && options_.insecure) argv.push_back("--src-tls-verify=false");
    if (from_registry && !authfile_.empty()) argv.insert(argv.end(), {"--src-authfile", authfile_});
    argv.insert(argv.end(), {source, "oci:" + layout() + ":image"});
    return Run(argv, /*capture=*/false, progress).status();
  }

 private:
  SkopeoSession(StagingDir dir, const PullOptions& options)
      : dir_(std::move(dir)), options_(options) {}

  StatusOr<base::RunResult> Run(std::vector<std::string> args, bool capture,
                                const Progress& progress) {
    base::Command command;
    command.argv = {SkopeoProgram(options_), "--policy", dir_.path() + "/policy.json"};
    command.argv.insert(command.argv.end(), args.begin(), args.end());
    // Big blobs go to the store's own filesystem, not /tmp; the lock is held by skopeo too.
    command.env.push_back("TMPDIR=" + dir_.path() + "/tmp");
    // How this user reaches registries: their CA bundle and proxy (no secrets; credentials go
    // through the auth file alone). A confined pull gets its namespace's proxy instead.
    const bool confined = options_.net_namespace_fd >= 0;
    for (const char* name : {"SSL_CERT_FILE", "SSL_CERT_DIR", "HTTPS_PROXY", "https_proxy",
                             "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"}) {
      if (confined && !std::string_view(name).starts_with("SSL_")) continue;
      if (const char* v = std::getenv(name); v != nullptr) {
        command.env.push_back(std::string(name) + "=" + v);
      }
    }
    if (confined) {
      command.env.insert(command.env.end(), options_.network_env.begin(),
                         options_.network_env.end());
      command.net_namespace_fd = options_.net_namespace_fd;
    }
    command.fds = {{dir_.lock_fd(), 3}};
    base::RunOptions run;
    run.timeout = options_.timeout;
    run.capture_stdout = capture;
    run.max_output_bytes = kMaxJsonBlobBytes;
    run.on_line = [&](const std::string& line) {
      if (progress && !line.empty()) progress("skopeo: " + base::TerminalSafe(line, 300));
    };
    auto r = base::Run(command, run);
    if (!r.ok()) {
      return Unavailable(r.status().message() +
                         " (codebox pulls and imports with skopeo; "
                         "Debian: apt-get install skopeo)");
    }
    if (!r->ok()) {
      return Unavailable("skopeo " + args.front() + " " + args.back() + ": " +
                         base::TerminalSafe(ExplainSkopeoFailure(*r), 4096));
    }
    return std::move(*r);
  }

  StagingDir dir_;
  PullOptions options_;
  std::string authfile_;
};

// The manifest `raw` when its digest is `digest`; a registry that sends other bytes than it
// was asked for is refused, whatever skopeo thought of them.
Status CheckDigest(const std::string& raw, const std::string& digest, const std::string& what) {
  std::string actual = "sha256:" + base::Sha256Hex(raw);
  if (actual != digest) {
    return ProtocolError("digest mismatch: the registry sent a manifest for " + what +
                         " whose digest is " + actual + ", not " + digest);
  }
  return Status::Ok();
}

Status CheckCanPull(const PullOptions& options, const ImageReference& ref, const char* verb) {
  if (options.insecure && !IsLocalRegistry(ref.registry)) {
    return InvalidArgument(
        "--insecure (plain HTTP, no TLS verification) is only for a registry "
        "on this host or at a private address; " +
        ref.registry + " is neither");
  }
  if (options.require_root && ::geteuid() != 0) {
    return PermissionDenied(std::string(verb) +
                            " an image needs root (its files belong to the users the image "
                            "names); run: sudo codebox image " +
                            (std::string(verb) == "pulling" ? "pull " : "import ") +
                            ref.Familiar());
  }
  return Status::Ok();
}

std::string Short(const std::string& digest) { return digest.substr(0, 7 + 12); }

// One pull or import at a time in this process: two boxes asking for the same new image
// would otherwise unpack it into the same staging dir (its name is the id and our pid).
// Other processes are kept apart by the staging dir's lock (CleanStaleTemps).
std::mutex g_pull_mutex;

// The store's directories are world-readable when root makes them (whatever root's umask and
// the home's mode), as image builds make them: every user's boxes read the system store.
Status PrepareStore(const std::string& home) {
  RETURN_IF_ERROR(base::MakeDirs(ImagesDir(home)).WithContext("create image store"));
  if (::geteuid() == 0) {
    for (const std::string& dir : {home, ImagesDir(home)}) {
      if (::chmod(dir.c_str(), 0755) != 0) return base::ErrnoStatus("chmod " + dir);
    }
  }
  return Status::Ok();
}

}  // namespace

std::string RefPointerName(const std::string& canonical_reference) {
  std::string out = canonical_reference;
  for (char& c : out) {
    if (c == '/') c = '%';
  }
  // A file name holds at most 255 bytes; a reference may be longer (name, tag and digest).
  if (out.size() > 200)
    out = out.substr(0, 150) + "#" + base::Sha256Hex(canonical_reference).substr(0, 32);
  return out;
}

bool IsOciImageName(const std::string& name) {
  if (!ParseImageReference(name).ok()) return false;
  if (!IsValidImageName(name)) return true;  // ':', '/' or '@': never a recipe's name
  // A plain word: a recipe's name when there is such a recipe, else a Docker Hub image.
  return !LoadRecipe(name).ok();
}

StatusOr<ImageInfo> FindOciImage(const std::vector<base::ImageStore>& stores,
                                 const std::string& reference) {
  ASSIGN_OR_RETURN(ImageReference ref, ParseImageReference(reference));
  const std::string pointer = RefPointerName(ref.Canonical());
  for (const base::ImageStore& store : stores) {
    std::string id = ReadPointer(ByRefDir(store.path), pointer);
    if (id.empty()) continue;
    std::string dir = ImagesDir(store.path) + "/" + id;
    auto record = ReadManifest(dir);
    if (!record.ok()) {
      if (::access(dir.c_str(), F_OK) != 0) continue;  // a pointer to a removed image
      return record.status().WithContext("image " + ref.Familiar());
    }
    record->info.store = store.path;
    record->info.store_kind = store.kind;
    return record->info;
  }
  std::string recipes;
  if (IsValidImageName(reference)) {
    std::string names;
    for (const std::string& r : ListRecipes()) names += (names.empty() ? "" : ", ") + r;
    recipes = " (and there is no recipe of that name; recipes: " + names + ")";
  }
  return NotFound("image '" + ref.Familiar() + "' is not in the store" + recipes + "; pull it: " +
                  (::geteuid() == 0 ? "" : "sudo ") + "codebox image pull " + ref.Familiar());
}

StatusOr<ImageInfo> PullImage(const std::string& home, const std::string& reference,
                              const PullOptions& options, const Progress& progress) {
  ASSIGN_OR_RETURN(ImageReference ref, ParseImageReference(reference));
  RETURN_IF_ERROR(CheckCanPull(options, ref, "pulling"));
  std::lock_guard<std::mutex> lock(g_pull_mutex);
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  const std::string images_dir = ImagesDir(home);
  // A digest names content: when the store has it, there is nothing to ask the registry.
  if (!ref.digest.empty() && !options.force) {
    auto found = FindOciImage({{home, base::ImageStore::Kind::kExplicit}}, ref.Canonical());
    if (found.ok()) {
      say("image " + ref.Familiar() + " is up to date (" + found->id + ")");
      return found;
    }
  }
  RETURN_IF_ERROR(PrepareStore(home));
  RETURN_IF_ERROR(CleanStaleTemps(images_dir, "", say));
  ASSIGN_OR_RETURN(SkopeoSession skopeo, SkopeoSession::Create(images_dir, options, ref.registry));

  say("resolving " + ref.Familiar() + " with " + ref.registry);
  ASSIGN_OR_RETURN(std::string raw, skopeo.InspectRaw(ref.Canonical()));
  std::string manifest_digest = "sha256:" + base::Sha256Hex(raw);
  if (!ref.digest.empty()) RETURN_IF_ERROR(CheckDigest(raw, ref.digest, ref.Familiar()));
  ASSIGN_OR_RETURN(bool is_index, IsImageIndex(raw));
  if (is_index) {
    ASSIGN_OR_RETURN(OciDescriptor chosen, SelectPlatform(raw));
    ImageReference platform_ref = ref.AtDigest(chosen.digest);
    ASSIGN_OR_RETURN(raw, skopeo.InspectRaw(platform_ref.Canonical()));
    RETURN_IF_ERROR(CheckDigest(raw, chosen.digest, platform_ref.Familiar()));
    manifest_digest = chosen.digest;
  }
  ASSIGN_OR_RETURN(OciManifest manifest, ParseManifest(raw));
  if (manifest.LayerBytes() > options.max_bytes) {
    return InvalidArgument("image " + ref.Familiar() + " has " +
                           base::FormatSize(manifest.LayerBytes()) +
                           " of compressed layers, more than the limit of " +
                           base::FormatSize(options.max_bytes) + " (--max-size)");
  }
  UnpackRequest request;
  request.home = home;
  request.reference = ref.Canonical();
  request.digest = manifest_digest;
  request.pointers = {ref.Canonical(), ref.AtDigest(manifest_digest).Canonical()};
  request.expected_config_digest = manifest.config.digest;
  if (!options.force) {
    // The same config (and so the same layers) is in the store already: point the tag at it.
    auto existing = FindUnpacked(request, options);
    if (existing.ok()) {
      say("image " + ref.Familiar() + " is up to date (" + existing->id + ", " +
          Short(manifest_digest) + ")");
      return existing;
    }
  }
  say("pulling " + ref.Familiar() + " (" + Short(manifest_digest) + ", " +
      std::to_string(manifest.layers.size()) + " layers, " +
      base::FormatSize(manifest.LayerBytes()) + ")");
  // By digest: what is copied is exactly what was inspected, even if the tag moves meanwhile.
  RETURN_IF_ERROR(skopeo
                      .Copy("docker://" + ref.AtDigest(manifest_digest).Canonical(),
                            /*from_registry=*/true, say)
                      .WithContext("pull " + ref.Familiar()));
  return UnpackLayout(request, skopeo.layout(), options, say);
}

StatusOr<ImageInfo> ImportImage(const std::string& home, const std::string& path,
                                const std::string& name, const PullOptions& options,
                                const Progress& progress) {
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  std::lock_guard<std::mutex> lock(g_pull_mutex);
  std::optional<ImageReference> ref;
  if (!name.empty()) {
    ASSIGN_OR_RETURN(ref, ParseImageReference(name));
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return base::ErrnoStatus("import " + path);
  if (options.require_root && ::geteuid() != 0) {
    return PermissionDenied(
        "importing an image needs root (its files belong to the users the "
        "image names); run: sudo codebox image import " +
        path);
  }
  ASSIGN_OR_RETURN(std::string transport, DetectArchiveTransport(path));
  std::string absolute = path;
  if (!absolute.starts_with("/")) {
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd) == nullptr) return base::ErrnoStatus("getcwd");
    absolute = std::string(cwd) + "/" + path;
  }
  if (!ref) {
    std::string given = ArchiveImageName(absolute, transport);
    if (given.empty()) {
      return InvalidArgument("import " + path +
                             ": the archive names no image; give it one: codebox image import "
                             "--name NAME[:TAG] " +
                             path);
    }
    ASSIGN_OR_RETURN(ref, ParseImageReference(given));
  }
  const std::string images_dir = ImagesDir(home);
  RETURN_IF_ERROR(PrepareStore(home));
  RETURN_IF_ERROR(CleanStaleTemps(images_dir, "", say));
  ASSIGN_OR_RETURN(SkopeoSession skopeo, SkopeoSession::Create(images_dir, options, ""));
  say("reading " + path + " (" + transport + ")");
  RETURN_IF_ERROR(skopeo.Copy(transport + ":" + absolute, /*from_registry=*/false, say)
                      .WithContext("import " + path));
  UnpackRequest request;
  request.home = home;
  request.reference = ref->Canonical();
  request.pointers = {ref->Canonical()};
  request.source_path = absolute;
  return UnpackLayout(request, skopeo.layout(), options, say);
}

}  // namespace codebox::image
