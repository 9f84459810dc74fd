// How a box this process runs starts (CreateBox on a BoxEnv): the driver chosen and started,
// its agent connected, the LocalBox made; a vm box restored from a template that fails falls
// back to a cold boot. BoxEnv's defaults and its real env, the image store and the drivers.
#include <algorithm>

#include "agent_client/agent_client.h"
#include "base/log.h"
#include "base/text.h"
#include "box/backend.h"
#include "box/image_lookup.h"
#include "box/local_box.h"
#include "image/store.h"

namespace codebox::box {
namespace {

constexpr std::chrono::milliseconds kHandshakeTimeout{60'000};  // a VM under tcg is slow
// A restored vm answers in a fraction of a second even under tcg; one that does not within
// this is taken for a bad template, not a slow guest.
constexpr std::chrono::milliseconds kRestoredHandshakeTimeout{15'000};

// The image store and the real drivers.
class DriverEnv final : public BoxEnv {
 public:
  StatusOr<std::unique_ptr<Backend>> StartBackend(const BoxOptions& options) override {
    ASSIGN_OR_RETURN(image::ImageInfo image, FindOrPullImage(options));
    return StartOnImage(options, image);
  }
};

struct Connected {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<protocol::AgentClient> agent;
};

// Starts a backend and connects to its agent. *restore_failed: it was a vm restored from a
// template whose agent did not answer (the template is removed; a boot may do better).
StatusOr<Connected> StartAndConnect(const BoxOptions& options, BoxEnv& env, bool* restore_failed) {
  *restore_failed = false;
  auto backend = env.StartBackend(options);
  if (!backend.ok()) {
    // A failed start quotes the guest console or the jail's log: box-controlled text.
    Status st = backend.status().WithContext("create box");
    return Status(st.code(), base::TerminalSafe(st.message()));
  }
  const bool restored = (*backend)->Info().start.starts_with("snapshot ");
  auto agent = protocol::AgentClient::Connect(
      (*backend)->TakeAgentFd(),
      restored ? std::min(env.handshake_timeout(), kRestoredHandshakeTimeout)
               : env.handshake_timeout(),
      (*backend)->GuestSetup());
  if (!agent.ok()) {
    Status st = agent.status().WithContext("create box: connect to agent");
    std::string diag = base::TerminalSafe((*backend)->Diagnostics());
    if (restored) (*backend)->DiscardTemplate();  // its next clone would fail the same way
    (void)(*backend)->Destroy();
    if (!diag.empty()) st = Status(st.code(), st.message() + "\n" + diag);
    *restore_failed = restored;
    return st;
  }
  return Connected{std::move(*backend), std::move(*agent)};
}

}  // namespace

std::chrono::milliseconds BoxEnv::handshake_timeout() const { return kHandshakeTimeout; }
std::chrono::milliseconds BoxEnv::agent_idle_timeout() const {
  return protocol::kDefaultIdleTimeout;
}
net::Resolver BoxEnv::resolver() const {
  return net::SystemResolver(net::EgressLimits{}.resolve_timeout);
}

BoxEnv& BoxEnv::Default() {
  static DriverEnv env;
  return env;
}

StatusOr<std::unique_ptr<Box>> CreateBox(const BoxOptions& options, BoxEnv& env) {
  RETURN_IF_ERROR(options.Validate().WithContext("create box"));
  bool restore_failed = false;
  auto connected = StartAndConnect(options, env, &restore_failed);
  std::string fallback;
  if (!connected.ok() && restore_failed && !options.no_fallback) {
    // Loaded, but its agent never answered (a damaged RAM file): a cold boot, said so.
    fallback = "started by a cold boot: the box restored from a template did not answer (" +
               base::TailLines(connected.status().message(), 3) + ")";
    CODEBOX_LOG(kWarn, "create box: " << fallback);
    BoxOptions booted = options;
    booted.no_snapshot = true;
    connected = StartAndConnect(booted, env, &restore_failed);
  } else if (!connected.ok() && restore_failed) {
    return Status(connected.status().code(),
                  "restored from a template, and --no-fallback: " + connected.status().message());
  }
  if (!connected.ok()) return connected.status();
  if (!fallback.empty()) connected->backend->AddWarning(std::move(fallback));
  return MakeLocalBox(options, std::move(connected->backend), std::move(connected->agent), env);
}

}  // namespace codebox::box
