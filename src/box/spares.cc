#include "box/spares.h"

#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <string>

#include "options/options_json.h"

namespace codebox::box {
namespace {

// One spare per key, of a driver's started thing T (jail::Jail, vm::Machine).
template <typename T>
class Spares {
 public:
  using Started = StatusOr<std::unique_ptr<T>>;

  // The spare for `key` if there is one, else nothing; the next caller's spare starts now,
  // while this caller uses the one it takes.
  std::optional<Started> Take(const std::string& key, std::function<Started()> start) {
    std::future<Started> spare;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& slot = spares_[key];
      spare = std::move(slot);
      slot = std::async(std::launch::async, std::move(start));
    }
    if (!spare.valid()) return std::nullopt;
    return spare.get();
  }

  void DestroyAll() {
    std::map<std::string, std::future<Started>> spares;
    {
      std::lock_guard<std::mutex> lock(mu_);
      spares.swap(spares_);
    }
    for (auto& [key, spare] : spares) {
      if (!spare.valid()) continue;
      Started started = spare.get();
      if (started.ok()) (void)(*started)->Destroy();
    }
  }

  ~Spares() { DestroyAll(); }

 private:
  std::mutex mu_;
  std::map<std::string, std::future<Started>> spares_;
};

Spares<jail::Jail>& Jails() {
  static Spares<jail::Jail> spares;
  return spares;
}

Spares<vm::Machine>& Machines() {
  static Spares<vm::Machine> spares;
  return spares;
}

}  // namespace

StatusOr<std::unique_ptr<jail::Jail>> TakePrestartedJail(const BoxOptions& options,
                                                         const jail::JailConfig& c) {
  // What the jail is made of beyond the options (hostname, the agent binary, the image tree the
  // options' image and home resolve to, and what the image's config made of the workdir and
  // the user), plus every option the started box depends on, as the schema marks them
  // (OptionSpec::shapes_box).
  std::string user = c.user ? std::to_string(c.user->uid) + ":" + std::to_string(c.user->gid) : "";
  std::string key = c.rootfs + '\n' + c.agent_path + '\n' + c.hostname + '\n' + c.workdir + '\n' +
                    user + '\n' + options::BoxShapeKey(options);
  auto spare = Jails().Take(key, [c] { return jail::Jail::Start(c); });
  if (spare && spare->ok()) return std::move(*spare);
  // No spare yet, or one that failed to start (which says nothing certain about now).
  return jail::Jail::Start(c);
}

StatusOr<std::unique_ptr<vm::Machine>> TakePrestartedMachine(const BoxOptions& options,
                                                             const vm::VmConfig& c) {
  std::string key = c.home + '\n' + c.image_tree + '\n' + c.agent_path + '\n' +
                    (c.snapshot ? "snapshot" : "boot") + '\n' + options::BoxShapeKey(options);
  auto spare = Machines().Take(key, [c] { return vm::Machine::StartParked(c); });
  if (spare && spare->ok()) {
    std::unique_ptr<vm::Machine> machine = std::move(**spare);
    if (machine->Resume(c.start_timeout).ok()) return machine;
    (void)machine->Destroy();
  }
  return vm::Machine::Start(c);
}

void DestroyPrestartedJails() {
  Jails().DestroyAll();
  Machines().DestroyAll();
}

}  // namespace codebox::box
