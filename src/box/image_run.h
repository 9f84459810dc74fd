// ImageRun: how a box runs its image's processes, from what the image's config says (an OCI
// image's Env, WorkingDir and User: image::ImageConfig) under the caller's BoxOptions and what
// the driver can do. A recipe image's config is empty, and its plan is what every box did
// before OCI images: root, BoxOptions::workdir, codebox's environment.
//
// The rules (docs/design.md, "What an image's config means in a box"):
//   * environment, later layers winning: codebox's defaults (PATH, HOME, LANG, MPLBACKEND) <
//     the image's Env < the box's network (proxy variables) < BoxOptions::env <
//     ExecOptions::env. HOME is the image user's home (ImageConfig::home, else "/") when the
//     box runs as that user and the image's Env names no HOME.
//   * workdir: a workdir the caller set is the box's, always. Left at its default (/work), an
//     image's WorkingDir that holds no files in the image and that the jail allows as a
//     workdir becomes the box's workdir (an empty scratch directory, the user's); otherwise
//     the workdir stays /work and execs start in the WorkingDir (its files visible, read-only
//     in a jail).
//   * user: every process runs as the image's uid:gid (or BoxOptions::user's, resolved in the
//     image's /etc/passwd in its place), when the driver can (a vm always; a jail only with
//     root on the host, which alone maps a second id); otherwise as root, and BoxInfo::user
//     says why. An exec may ask for root instead (ExecOptions::user), never for a third user.
#ifndef CODEBOX_BOX_IMAGE_RUN_H_
#define CODEBOX_BOX_IMAGE_RUN_H_

#include <map>
#include <optional>
#include <string>

#include "codebox/options.h"
#include "codebox/status.h"
#include "image/store.h"
#include "protocol/messages.h"

namespace codebox::box {

struct ImageRun {
  // The writable scratch directory the box makes: relative box paths are under it.
  std::string workdir;
  // Where an exec without ExecOptions::cwd starts: the workdir, or the image's WorkingDir.
  std::string cwd;
  // The image's Env (HOME added as above): the layer between codebox's defaults and the rest.
  std::map<std::string, std::string> env;
  // Who every process in the box runs as; nullopt: box root.
  std::optional<protocol::msg::User> user;
  // BoxInfo::user: "root", "1000:1000", "1000:1000 (app)", or "root (...)" saying why the
  // image's user is not the one.
  std::string user_text = "root";
  // The box's user as the image or BoxOptions::user named it ("app", "1000"), which an exec
  // may name too; "" for root.
  std::string user_name;
};

// Who an exec runs as (protocol::msg::Exec::user): `asked` is ExecOptions::user. Empty or the
// box's user (by its name, or uid): run.user; "root" or "0": root. Anything else is
// kInvalidArgument: a jail maps no third id.
StatusOr<std::optional<protocol::msg::User>> ExecUser(const ImageRun& run,
                                                      const std::string& asked);

// What a recipe image (an empty config) gets: root, BoxOptions::workdir, no image env.
ImageRun RecipeRun(const BoxOptions& options);

// The environment every process of the box starts with (before ExecOptions::env): codebox's
// defaults < run.env < the box's proxy variables (with a network) < BoxOptions::env.
std::map<std::string, std::string> BoxEnvironment(const BoxOptions& options, const ImageRun& run);

// The image's config with BoxOptions::user, when given, in place of the image's own User,
// resolved against the image's /etc/passwd and /etc/group (kInvalidArgument naming the image
// for a user it does not have).
StatusOr<image::ImageConfig> ConfigForUser(const BoxOptions& options,
                                           const image::ImageInfo& image);

// Whether the image `options` names, found in the stores as a box finds it (never pulled),
// holds `user` in its /etc/passwd.
bool ImageHasUser(const BoxOptions& options, const std::string& user);

// `can_switch_user`: the driver can run processes as another user (jail::CanMapUser() for
// the jail). Fails (kInvalidArgument, naming the image) on an image Env entry that is not
// NAME=VALUE or that ValidateEnvironment refuses, and on an id past 2^32 - 2.
StatusOr<ImageRun> PlanImageRun(const BoxOptions& options, const image::ImageConfig& config,
                                bool can_switch_user);

}  // namespace codebox::box

#endif  // CODEBOX_BOX_IMAGE_RUN_H_
