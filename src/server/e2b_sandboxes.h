// What `codebox serve`'s E2B face (docs/e2b.md) keeps of each sandbox beyond its box: the
// access token of its in-sandbox routes, its template and metadata, and the sizes E2B's list
// shows. A sandbox is a box of the registry under the same id. An entry whose box is gone is
// kept as gone (the last kMaxGone of them), so that its SDK, still holding the token, is told
// "not running" rather than "wrong token". Thread-safe.
#ifndef CODEBOX_SERVER_E2B_SANDBOXES_H_
#define CODEBOX_SERVER_E2B_SANDBOXES_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/status.h"

namespace codebox::server {

// A code context (E2B's createCodeContext): its own kernel, a named code session of the box
// (RunCodeOptions::session) under the context's id.
struct E2bContext {
  std::string id;
  std::string language;
  std::string cwd;
};

// A box's CPU time and when it was read (getMetrics).
struct E2bCpuSample {
  std::chrono::microseconds cpu_time{0};
  std::chrono::system_clock::time_point at;
};

struct E2bSandbox {
  std::string id = {};            // the box's id
  std::string tenant = {};        // whose box it is
  std::string access_token = {};  // random, this sandbox's alone
  std::string template_id = {};
  std::map<std::string, std::string> metadata = {};
  double cpus = 1;
  uint64_t memory_mib = 0;
  uint64_t disk_mib = 0;
  bool gone = false;                      // its box was destroyed
  std::vector<E2bContext> contexts = {};  // made with POST /contexts, oldest first
  std::optional<E2bCpuSample> last_cpu = {};
};

class E2bSandboxes {
 public:
  // A new entry for `sandbox` (its access_token made here, 32 random bytes in hex); replaces
  // none: an id already known keeps its entry, which is answered.
  E2bSandbox Add(E2bSandbox sandbox);
  std::optional<E2bSandbox> Find(std::string_view id) const;
  // The entry whose token `token` is, compared in constant time; nullopt for an unknown id
  // or a wrong token alike.
  std::optional<E2bSandbox> Authenticate(std::string_view id, std::string_view token) const;
  // The live sandbox whose access token signs to `signature` (`sign(token)`), for a URL that
  // names no sandbox (a pre-signed /files URL); every one is tried, each compared in constant
  // time. nullopt when none does.
  std::optional<E2bSandbox> AuthenticateSignature(
      const std::function<std::string(std::string_view token)>& sign,
      std::string_view signature) const;
  // The entries whose box lives (as far as this table knows), ordered by id.
  std::vector<E2bSandbox> All() const;
  // Adds a context to a sandbox this table holds: kNotFound when it does not (or it is gone),
  // kResourceExhausted when it holds `max` contexts already (checked and added at once, so
  // requests racing each other cannot pass the bound).
  Status AddContext(std::string_view id, E2bContext context, size_t max);
  // Removes one; false when the sandbox or the context is unknown.
  bool RemoveContext(std::string_view id, std::string_view context_id);
  // getMetrics' CPU figure is the use since the previous sample: stores `now` as the
  // sandbox's last sample and answers the one before (nullopt for the first, or an unknown
  // sandbox).
  std::optional<E2bCpuSample> SwapCpuSample(std::string_view id, E2bCpuSample now);
  // Marks the sandbox gone; the oldest gone entry past kMaxGone is forgotten.
  void Remove(std::string_view id);

  static constexpr size_t kMaxGone = 4096;

 private:
  mutable std::mutex mu_;
  std::map<std::string, E2bSandbox, std::less<>> sandboxes_;
  std::deque<std::string> gone_;  // oldest first
};

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_E2B_SANDBOXES_H_
