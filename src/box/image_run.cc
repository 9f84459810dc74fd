#include "box/image_run.h"

#include <fcntl.h>

#include "base/io.h"
#include "base/json.h"
#include "base/paths.h"
#include "box/egress.h"
#include "image/oci_unpack.h"
#include "jail/mounts.h"

namespace codebox::box {
namespace {

StatusOr<std::map<std::string, std::string>> ImageEnvironment(const BoxOptions& options,
                                                              const image::ImageConfig& config) {
  std::map<std::string, std::string> env;
  const std::string what = "image " + options.image + ": its environment";
  for (const std::string& entry : config.env) {
    size_t eq = entry.find('=');
    // The importer drops these; an image store is still input from elsewhere.
    if (eq == std::string::npos) {
      return InvalidArgument(what + ": entry '" + entry.substr(0, 64) + "' is not NAME=VALUE");
    }
    env.insert_or_assign(entry.substr(0, eq), entry.substr(eq + 1));  // the last one wins
  }
  RETURN_IF_ERROR(ValidateEnvironment(env).WithContext(what));
  return env;
}

// "1000:1000", with the name the image gave when it gave one ("1000:1000 (app)").
std::string DescribeUser(const protocol::msg::User& user, const std::string& as_written) {
  std::string ids = std::to_string(user.uid) + ":" + std::to_string(user.gid);
  if (as_written.find_first_not_of("0123456789:") == std::string::npos) return ids;
  return ids + " (" + as_written + ")";
}

}  // namespace

ImageRun RecipeRun(const BoxOptions& options) {
  ImageRun run;
  run.workdir = options.workdir;
  run.cwd = options.workdir;
  return run;
}

std::map<std::string, std::string> BoxEnvironment(const BoxOptions& options, const ImageRun& run) {
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
      {"HOME", "/root"},
      {"LANG", "C.UTF-8"},
      {"MPLBACKEND", "Agg"},  // charts render to files; there is no display
      // Output goes to a pipe; unbuffered, a program's prints reach the caller as they happen.
      {"PYTHONUNBUFFERED", "1"}};
  for (const auto& [k, v] : run.env) env[k] = v;
  // The proxy is the box's only way out, whatever the image's Env says about proxies.
  if (EffectiveNetwork(options) != NetworkMode::kNone) {
    for (auto& [k, v] : ProxyEnvironment(options)) env[k] = std::move(v);
  }
  for (const auto& [k, v] : options.env) env[k] = v;
  return env;
}

StatusOr<image::ImageConfig> ConfigForUser(const BoxOptions& options,
                                           const image::ImageInfo& image) {
  image::ImageConfig config = image.config;
  if (options.user.empty()) return config;
  base::UniqueFd root(::open(image.rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return base::ErrnoStatus("open image " + image.name);
  config.user = options.user;
  RETURN_IF_ERROR(image::ResolveImageUser(root.get(), &config).WithContext("image " + image.name));
  return config;
}

bool ImageHasUser(const BoxOptions& options, const std::string& user) {
  auto image = image::FindImage(base::ImageStores(options.home), options.image);
  if (!image.ok()) return false;
  BoxOptions with_user = options;
  with_user.user = user;
  return ConfigForUser(with_user, *image).ok();
}

StatusOr<ImageRun> PlanImageRun(const BoxOptions& options, const image::ImageConfig& config,
                                bool can_switch_user) {
  ImageRun run = RecipeRun(options);
  ASSIGN_OR_RETURN(run.env, ImageEnvironment(options, config));

  const uint32_t uid = config.uid.value_or(0), gid = config.gid.value_or(0);
  if (uid > protocol::msg::kMaxId || gid > protocol::msg::kMaxId) {
    return InvalidArgument("image " + options.image + ": its user " + std::to_string(uid) + ":" +
                           std::to_string(gid) + " is not a user one can run as");
  }
  if (uid != 0 || gid != 0) {
    const protocol::msg::User user{uid, gid};
    run.user_name = config.user;
    if (can_switch_user) {
      run.user = user;
      run.user_text = DescribeUser(user, config.user);
      // Root's /root is no home for the user (and not theirs to write in a jail).
      if (!run.env.count("HOME")) run.env["HOME"] = config.home.empty() ? "/" : config.home;
    } else {
      run.user_text = "root (the image's user " + DescribeUser(user, config.user) +
                      " cannot be: a jail without root on the host maps only one id)";
    }
  }

  // A workdir the caller chose wins; the default is told apart by its value.
  if (options.workdir == BoxOptions{}.workdir && !config.working_dir.empty()) {
    if (!config.working_dir_has_files && jail::mounts::ValidateWorkdir(config.working_dir).ok()) {
      run.workdir = config.working_dir;
    }
    run.cwd = config.working_dir;
  }
  return run;
}

StatusOr<std::optional<protocol::msg::User>> ExecUser(const ImageRun& run,
                                                      const std::string& asked) {
  if (asked.empty()) return run.user;
  if (asked == "root" || asked == "0" || asked == "0:0") {
    if (!run.user) return std::optional<protocol::msg::User>();
    return std::optional<protocol::msg::User>(protocol::msg::User{0, 0});
  }
  // The name as the box was asked for it ("user", "1000", "1000:1000"), or its uid.
  const bool box_user =
      !run.user_name.empty() &&
      (asked == run.user_name || (run.user && (asked == std::to_string(run.user->uid) ||
                                               asked == std::to_string(run.user->uid) + ":" +
                                                            std::to_string(run.user->gid))));
  if (box_user) return run.user;
  // Both names may be anyone's (a client's request, an image's /etc/passwd): excerpts.
  return InvalidArgument("exec: user '" + base::Excerpt(asked) + "': this box runs as " +
                         (run.user_name.empty() ? std::string("root")
                                                : base::Excerpt(run.user_name)) +
                         ", and an exec may run as that user or as root only");
}

}  // namespace codebox::box
