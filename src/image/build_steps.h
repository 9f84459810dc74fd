// The steps of an image build, each on a tree under construction. BuildImage (builder.cc)
// strings them together; they are apart so each reads as one job and tests can reach them.
#ifndef CODEBOX_IMAGE_BUILD_STEPS_H_
#define CODEBOX_IMAGE_BUILD_STEPS_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "codebox/status.h"
#include "image/store.h"

namespace codebox::image {

struct StepContext {
  std::string rootfs;       // the tree being built
  std::string mirror;       // Debian archive URI
  std::string debootstrap;  // programs to run (fakes in tests)
  std::string chroot;
  int lock_fd = -1;  // the build's lock on its temp dir, held by every tool (builder.cc)
  std::function<void(const std::string&)> say;  // progress, one short line at a time
};

// debootstrap --variant=minbase SUITE ROOTFS MIRROR.
Status RunDebootstrap(const StepContext& ctx, const Recipe& recipe);
// chroot ROOTFS apt-get install --no-install-recommends PACKAGES, with services kept from
// starting and the host's resolver borrowed for the download.
Status InstallPackages(const StepContext& ctx, const Recipe& recipe);
// chroot ROOTFS useradd: the unprivileged account a box may run as (BoxOptions::user "user"),
// as E2B's templates have it: uid and gid kBoxUserId, home /home/user made from /etc/skel,
// shell /bin/bash.
Status AddBoxUser(const StepContext& ctx);
// (package, version) of every installed package, read with the host's dpkg-query.
StatusOr<std::vector<std::pair<std::string, std::string>>> QueryPackages(const StepContext& ctx);
// Drops apt lists and caches, docs (but copyright files), man/info pages, locales, logs.
Status StripTree(const std::string& rootfs);
// Adds what the drivers expect: /work and /.codebox mount points, hostname, hosts.
Status FinishTree(const std::string& rootfs);

// Turns a tool's chatty output into a few progress lines: one when the phase changes
// ("debootstrap: unpacking"), then at most one every few seconds with a count and the
// current item. Warnings and errors pass through.
class OutputSummarizer {
 public:
  // classify(line, &phase, &item) returns false for lines to ignore.
  using Classifier = std::function<bool(const std::string&, std::string*, std::string*)>;
  OutputSummarizer(std::string tool, Classifier classify,
                   std::function<void(const std::string&)> say)
      : tool_(std::move(tool)), classify_(std::move(classify)), say_(std::move(say)) {}
  void OnLine(const std::string& line);

 private:
  std::string tool_;
  Classifier classify_;
  std::function<void(const std::string&)> say_;
  std::string phase_;
  int count_ = 0;
  double last_emit_ = 0;
};

bool ClassifyDebootstrapLine(const std::string& line, std::string* phase, std::string* item);
bool ClassifyAptLine(const std::string& line, std::string* phase, std::string* item);

}  // namespace codebox::image

#endif  // CODEBOX_IMAGE_BUILD_STEPS_H_
