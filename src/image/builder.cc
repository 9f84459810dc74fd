// BuildImage: recipe -> debootstrap minbase -> apt-get install in a chroot -> strip -> store.
// Every step works inside images/.tmp-<id>-<pid>/; the tree is renamed to images/<id> only
// once complete, so a failed, interrupted or killed build never looks like a whole image.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <sstream>

#include "base/fs.h"
#include "base/io.h"
#include "base/text.h"
#include "base/unique_fd.h"
#include "image/build_steps.h"
#include "image/mirror.h"
#include "image/recipe.h"
#include "image/store.h"
#include "image/store_internal.h"

namespace codebox::image {
namespace {

std::string ProgramOr(const std::string& chosen, const char* env_var, const char* fallback) {
  if (!chosen.empty()) return chosen;
  if (const char* v = std::getenv(env_var); v != nullptr && *v != '\0') return v;
  return fallback;
}

}  // namespace

StatusOr<ImageInfo> BuildImage(const std::string& home, const Recipe& recipe,
                               const std::function<void(const std::string&)>& progress) {
  return BuildImage(home, recipe, progress, BuildOptions{});
}

StatusOr<ImageInfo> BuildImage(const std::string& home, const Recipe& recipe,
                               const std::function<void(const std::string&)>& progress,
                               const BuildOptions& options) {
  auto start = std::chrono::steady_clock::now();
  auto say = [&](const std::string& line) {
    if (!progress) return;
    auto secs =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start)
            .count();
    char prefix[24];
    std::snprintf(prefix, sizeof prefix, "[%4llds] ", static_cast<long long>(secs));
    progress(prefix + line);
  };
  if (!IsValidImageName(recipe.name))
    return InvalidArgument("bad image name '" + recipe.name + "'");
  const std::string id = ImageId(recipe);
  const std::string images_dir = ImagesDir(home);
  const std::string final_dir = images_dir + "/" + id;

  if (!options.force && base::PathExists(final_dir + "/manifest.json")) {
    auto record = ReadManifest(final_dir);
    if (record.ok()) {
      RETURN_IF_ERROR(SetNamePointer(home, recipe.name, id));
      if (progress) progress("image " + recipe.name + " is up to date (" + id + ")");
      return record->info;
    }
    say("existing image " + id + " is unreadable (" + record.status().message() + "); rebuilding");
  }
  if (options.require_root && ::geteuid() != 0) {
    return PermissionDenied(
        "building an image needs root (debootstrap creates device nodes "
        "and files owned by other users); run: sudo codebox image build " +
        recipe.name);
  }
  RETURN_IF_ERROR(base::MakeDirs(images_dir).WithContext("create image store"));
  if (::geteuid() == 0) {
    // Root's images serve every user (the system store): the store's own directories are
    // world-readable whatever root's umask is. Each image's dirs are set below.
    for (const std::string& dir : {home, images_dir}) {
      if (::chmod(dir.c_str(), 0755) != 0) return base::ErrnoStatus("chmod " + dir);
    }
  }
  RETURN_IF_ERROR(CleanStaleTemps(images_dir, id, say));

  std::string mirror = options.mirror;
  if (mirror.empty()) {
    ASSIGN_OR_RETURN(mirror, FindMirror(recipe.suite));
  }

  ASSIGN_OR_RETURN(StagingDir staging, StagingDir::Create(images_dir, id));
  const std::string& tmp_dir = staging.path();
  StepContext ctx;
  ctx.rootfs = tmp_dir + "/rootfs";
  ctx.mirror = mirror;
  ctx.debootstrap = ProgramOr(options.debootstrap, "CODEBOX_DEBOOTSTRAP", "debootstrap");
  ctx.chroot = ProgramOr(options.chroot, "CODEBOX_CHROOT", "chroot");
  ctx.lock_fd = staging.lock_fd();
  ctx.say = say;

  say("building image " + recipe.name + " (" + id + "): debootstrap " + recipe.suite + " from " +
      mirror);
  RETURN_IF_ERROR(RunDebootstrap(ctx, recipe).WithContext("build image " + recipe.name));
  if (!recipe.packages.empty()) {
    RETURN_IF_ERROR(InstallPackages(ctx, recipe).WithContext("build image " + recipe.name));
  }
  RETURN_IF_ERROR(AddBoxUser(ctx).WithContext("build image " + recipe.name));
  BuildRecord record;
  ASSIGN_OR_RETURN(record.packages, QueryPackages(ctx));
  say("stripping apt lists, caches, docs, man pages and locales");
  RETURN_IF_ERROR(StripTree(ctx.rootfs).WithContext("build image " + recipe.name));
  RETURN_IF_ERROR(FinishTree(ctx.rootfs).WithContext("build image " + recipe.name));

  record.info.name = recipe.name;
  record.info.id = id;
  record.info.size_bytes = base::TreeSize(ctx.rootfs);
  record.info.built_at = NowIso8601();
  record.description = recipe.description;
  record.mirror = mirror;
  record.build_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RETURN_IF_ERROR(WriteManifest(tmp_dir + "/manifest.json", record, recipe.text));
  // Readable by every user whatever the umask (the tree's insides are as dpkg made them).
  for (const auto& [path, mode] : {std::pair<std::string, mode_t>{tmp_dir, 0755},
                                   {ctx.rootfs, 0755},
                                   {tmp_dir + "/manifest.json", 0644}}) {
    if (::chmod(path.c_str(), mode) != 0) return base::ErrnoStatus("chmod " + path);
  }

  RETURN_IF_ERROR(staging.CommitTo(final_dir));
  RETURN_IF_ERROR(SetNamePointer(home, recipe.name, id));
  record.info.dir = final_dir;
  record.info.rootfs = final_dir + "/rootfs";
  say("image " + recipe.name + " built: " + id + ", " + base::FormatSize(record.info.size_bytes) +
      ", " + std::to_string(static_cast<int>(record.build_seconds)) + " s");
  return record.info;
}

}  // namespace codebox::image
