#include "box/jail_spares.h"

#include <future>
#include <map>
#include <mutex>
#include <string>

#include "box/options_json.h"

namespace codebox::box {
namespace {

using StartedJail = StatusOr<std::unique_ptr<jail::Jail>>;

// What the jail is made of beyond the options (hostname, the agent binary, the image tree the
// options' image and home resolve to, and what the image's config made of the workdir and the
// user), plus every option the started box depends on, as the schema marks them
// (OptionSpec::shapes_box).
std::string KeyOf(const BoxOptions& options, const jail::JailConfig& c) {
  std::string user = c.user ? std::to_string(c.user->uid) + ":" + std::to_string(c.user->gid) : "";
  return c.rootfs + '\n' + c.agent_path + '\n' + c.hostname + '\n' + c.workdir + '\n' + user +
         '\n' + BoxShapeKey(options);
}

class Spares {
 public:
  StartedJail Take(const BoxOptions& options, const jail::JailConfig& config) {
    std::future<StartedJail> spare;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& slot = spares_[KeyOf(options, config)];
      spare = std::move(slot);
      // The next caller's spare starts now, while this caller uses the one it takes.
      slot = std::async(std::launch::async, [config] { return jail::Jail::Start(config); });
    }
    if (spare.valid()) {
      StartedJail taken = spare.get();
      if (taken.ok()) return taken;
      // A spare that failed to start says nothing certain about now: start one directly.
    }
    return jail::Jail::Start(config);
  }

  void DestroyAll() {
    std::map<std::string, std::future<StartedJail>> spares;
    {
      std::lock_guard<std::mutex> lock(mu_);
      spares.swap(spares_);
    }
    for (auto& [key, spare] : spares) {
      if (!spare.valid()) continue;
      StartedJail jail = spare.get();
      if (jail.ok()) (void)(*jail)->Destroy();
    }
  }

  ~Spares() { DestroyAll(); }

 private:
  std::mutex mu_;
  std::map<std::string, std::future<StartedJail>> spares_;
};

Spares& Instance() {
  static Spares spares;
  return spares;
}

}  // namespace

StartedJail TakePrestartedJail(const BoxOptions& options, const jail::JailConfig& config) {
  return Instance().Take(options, config);
}

void DestroyPrestartedJails() { Instance().DestroyAll(); }

}  // namespace codebox::box
