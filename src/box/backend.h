// Backend: a running box as the Box sees it, whichever driver made it. The drivers
// (src/jail, src/vm) know nothing of Box; this is the adapter between them.
#ifndef CODEBOX_BOX_BACKEND_H_
#define CODEBOX_BOX_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "base/unique_fd.h"
#include "codebox/box.h"
#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::box {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual base::UniqueFd TakeAgentFd() = 0;
  virtual Status Destroy() = 0;
  // OOM kills counted by the boundary itself (cgroup), or 0 when only the agent can tell.
  virtual uint64_t OomKillCount() const { return 0; }
  // Extra words for errors when the box dies (e.g. the VM console's last lines).
  virtual std::string Diagnostics() const { return ""; }
  // driver name and limits in force.
  virtual BoxInfo Info() const = 0;
};

// The driver a BoxOptions asks for, resolved against what this host can do.
struct DriverChoice {
  DriverKind kind = DriverKind::kJail;  // never kAuto
  bool emulated = false;                // vm under tcg
  std::string reason;                   // why this one ("auto: no kvm (...), using jail")
};
StatusOr<DriverChoice> ChooseDriver(const BoxOptions& options);

// Starts the chosen driver on an image rootfs.
StatusOr<std::unique_ptr<Backend>> StartBackend(const BoxOptions& options,
                                                const DriverChoice& choice,
                                                const std::string& image_rootfs);

}  // namespace codebox::box

#endif  // CODEBOX_BOX_BACKEND_H_
