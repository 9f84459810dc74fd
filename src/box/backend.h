// Backend: a running box as the Box sees it, whichever driver made it. The drivers
// (src/jail, src/vm) know nothing of Box; this is the adapter between them.
#ifndef CODEBOX_BOX_BACKEND_H_
#define CODEBOX_BOX_BACKEND_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "box/image_run.h"
#include "codebox/box.h"
#include "codebox/options.h"
#include "codebox/status.h"
#include "protocol/messages.h"

namespace codebox::box {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual base::UniqueFd TakeAgentFd() = 0;
  virtual Status Destroy() = 0;
  // OOM kills counted by the boundary itself (cgroup), or 0 when only the agent can tell.
  virtual uint64_t OomKillCount() const { return 0; }
  // What the boundary measures of the box's use (Box::Usage).
  virtual StatusOr<BoxUsage> Usage() const {
    return Unavailable("the " + Info().driver + " driver does not measure a box's usage");
  }
  // Extra words for errors when the box dies (e.g. the VM console's last lines).
  virtual std::string Diagnostics() const { return ""; }
  // driver name and limits in force.
  virtual BoxInfo Info() const = 0;
  // A vm box restored from a template that then failed: removes the template, so the next box
  // makes it anew instead of failing the same way.
  virtual void DiscardTemplate() {}
  // Said in Info().warnings from now on (a fallback decided above the driver).
  void AddWarning(std::string warning) { warnings_.push_back(std::move(warning)); }
  const std::vector<std::string>& added_warnings() const { return warnings_; }
  // What the host's hello tells the agent (vm boxes: fresh entropy, the clock, guest limits);
  // nullopt for a driver whose agent needs none of it.
  virtual std::optional<protocol::msg::GuestSetup> GuestSetup() const { return std::nullopt; }

  // How the box runs its image's processes, as planned when it was started (PlanImageRun: the
  // driver was made for it). Unset (a test's backend): as a recipe image, RecipeRun.
  const std::optional<ImageRun>& image_run() const { return image_run_; }
  void set_image_run(ImageRun run) { image_run_ = std::move(run); }

 private:
  std::optional<ImageRun> image_run_;
  std::vector<std::string> warnings_;
};

// The driver a BoxOptions asks for, resolved against what this host can do.
struct DriverChoice {
  DriverKind kind = DriverKind::kJail;  // never kAuto
  bool emulated = false;                // vm under tcg
  std::string reason;                   // why this one ("auto: no kvm (...), using jail")
};
StatusOr<DriverChoice> ChooseDriver(const BoxOptions& options);

// Starts the chosen driver on `image`'s tree, made to run as the image's config says
// (PlanImageRun); the backend carries that plan.
StatusOr<std::unique_ptr<Backend>> StartBackend(const BoxOptions& options,
                                                const DriverChoice& choice,
                                                const image::ImageInfo& image);

// ChooseDriver, then StartBackend: what the real BoxEnv does once it found the image. Tests
// call it with an image whose config they wrote (an OCI image's run config on a recipe
// image's tree).
StatusOr<std::unique_ptr<Backend>> StartOnImage(const BoxOptions& options,
                                                const image::ImageInfo& image);

}  // namespace codebox::box

#endif  // CODEBOX_BOX_BACKEND_H_
