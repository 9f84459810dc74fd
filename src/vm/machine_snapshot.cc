// Machine's templates and restores (snapshot.h has the store): MakeTemplate boots a machine on
// a shared RAM file, warms it and saves its state; Restore starts a clone on a private mapping
// of that file and loads the state, leaving it parked (paused) or running.
#include <sys/file.h>

#include <thread>

#include "base/fs.h"
#include "base/io.h"
#include "base/log.h"
#include "protocol/frame.h"
#include "protocol/message.h"
#include "protocol/messages.h"
#include "vm/machine_impl.h"
#include "vm/snapshot.h"

namespace codebox::vm {

Status Machine::RestoreState(std::chrono::milliseconds timeout, bool park) {
  Impl& m = *impl_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  Status st = QmpRun(m.qmp_fd.get(),
                     {R"({"execute":"qmp_capabilities"})", kQmpIgnoreShared,
                      R"({"execute":"migrate-incoming","arguments":{"uri":"fd:)" +
                          std::to_string(kQemuStateFd) + R"("}})"},
                     timeout)
                  .status();
  // {"status": "inmigrate"} until the state is in; then "paused", since the template was saved
  // stopped. A parked machine stays so; the others run now.
  if (st.ok()) st = WaitForStatus("paused", deadline);
  if (st.ok()) {
    m.parked = true;
    if (park) return Status::Ok();
    st = Resume(timeout);
    if (st.ok()) return Status::Ok();
  }
  std::lock_guard<std::mutex> lock(m.mu);
  std::string why = m.ReapLocked(/*block=*/true) ? m.DescribeEnd() : st.message();
  std::string diag = m.Diagnostics();
  (void)m.StopLocked();
  return StartFailed("restore: " + why + diag);
}

Status Machine::WaitForStatus(const std::string& status,
                              std::chrono::steady_clock::time_point deadline) {
  const std::string want = "\"status\": \"" + status + "\"";
  for (;;) {
    auto left = std::max(std::chrono::milliseconds(1),
                         std::chrono::ceil<std::chrono::milliseconds>(
                             deadline - std::chrono::steady_clock::now()));
    ASSIGN_OR_RETURN(std::string reply,
                     QmpRun(impl_->qmp_fd.get(), {R"({"execute":"query-status"})"}, left));
    if (reply.find(want) != std::string::npos) return Status::Ok();
    if (std::chrono::steady_clock::now() >= deadline) {
      return DeadlineExceeded("the restored machine was not " + status + " in time (" +
                              base::TerminalSafe(reply, 200) + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Status Machine::Resume(std::chrono::milliseconds timeout) {
  if (!impl_->parked) return Status::Ok();
  auto deadline = std::chrono::steady_clock::now() + timeout;
  RETURN_IF_ERROR(QmpRun(impl_->qmp_fd.get(), {R"({"execute":"cont"})"}, timeout).status());
  // The host's hello must not come before the guest runs: bytes the device took while its
  // state was still loading would be lost, and a paused guest answers nothing.
  RETURN_IF_ERROR(WaitForStatus("running", deadline));
  impl_->parked = false;
  return Status::Ok();
}

StatusOr<std::string> Machine::SaveState(const std::string& state_path,
                                         std::chrono::milliseconds timeout) {
  Impl& m = *impl_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  // The template's host speaks to the agent (warm-up below); a clone's host gets a hello of its
  // own (GuestSetup::resend_hello).
  protocol::FrameDecoder decoder;
  auto next_frame = [&]() -> StatusOr<protocol::Frame> {
    for (;;) {
      auto frame = decoder.Next();
      if (!frame.ok()) return frame.status().WithContext("template: from the agent");
      if (frame->has_value()) return std::move(**frame);
      struct pollfd p = {m.agent_fd.get(), POLLIN, 0};
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline -
                                                               std::chrono::steady_clock::now());
      if (left.count() <= 0) return DeadlineExceeded("template: the agent did not answer in time");
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      ssize_t n = ::recv(m.agent_fd.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) {
        return BoxCrashed("template: the agent's connection closed");
      }
      if (n > 0) decoder.Feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  };
  // Waits for the event that ends `stream` (output frames on the way are dropped).
  auto terminal_event = [&](uint32_t stream) -> StatusOr<protocol::msg::Event> {
    for (;;) {
      ASSIGN_OR_RETURN(protocol::Frame frame, next_frame());
      if (frame.stream != stream || frame.type != protocol::FrameType::kControl) continue;
      auto event = protocol::msg::DecodeEventPayload(frame.payload);
      // An exec's `started` comes before its end.
      if (event.ok() && std::holds_alternative<protocol::msg::Started>(*event)) continue;
      return event;
    }
  };
  ASSIGN_OR_RETURN(protocol::Frame hello, next_frame());
  if (hello.type != protocol::FrameType::kHello) {
    return ProtocolError("template: the agent did not begin with its hello");
  }
  protocol::msg::Hello ours;
  ours.protocol = protocol::kProtocolVersion;
  ours.client = "codebox/0.1.0 (template)";
  std::string out = protocol::EncodeFrame(protocol::FrameType::kHello, 0,
                                          protocol::msg::EncodeHello(ours));
  // Run Python once, so the template's page cache holds the interpreter and its standard
  // library: every clone's first Python then reads none of it from the disk (about 0.25 s of
  // a first run under tcg). An image without python3 just fails the exec; nothing else runs.
  // No process outlives it, and none keeps random state (the clone's RNG is reseeded anyway).
  protocol::msg::Exec warm;
  warm.argv = {"python3", "-c", "import json, os, re, subprocess"};
  warm.env = {{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
              {"HOME", "/root"},
              {"LANG", "C.UTF-8"}};
  warm.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  warm.output_limit = 4096;
  out += protocol::EncodeFrame(protocol::FrameType::kControl, 1, protocol::msg::EncodeRequest(warm));
  RETURN_IF_ERROR(base::WriteAll(m.agent_fd.get(), out).WithContext("template: warm-up"));
  ASSIGN_OR_RETURN(protocol::msg::Event warmed, terminal_event(1));
  if (!std::holds_alternative<protocol::msg::Exit>(warmed)) {
    CODEBOX_LOG(kInfo, "vm: template without a warm Python (the image has none?)");
  }
  RETURN_IF_ERROR(base::WriteAll(m.agent_fd.get(),
                                 protocol::EncodeFrame(protocol::FrameType::kControl, 3,
                                                       protocol::msg::EncodeRequest(
                                                           protocol::msg::AwaitHello{})))
                      .WithContext("template: await_hello"));
  ASSIGN_OR_RETURN(protocol::msg::Event waiting, terminal_event(3));
  if (!std::holds_alternative<protocol::msg::Done>(waiting)) {
    return ProtocolError("template: the agent refused to wait for a new hello");
  }
  if (decoder.HasPartialFrame()) return ProtocolError("template: the agent sent more than asked");
  base::UniqueFd state(::open(state_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!state.valid()) return base::ErrnoStatus("template: open " + state_path);
  auto left = [&] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::ceil<std::chrono::milliseconds>(deadline -
                                                                  std::chrono::steady_clock::now()));
  };
  RETURN_IF_ERROR(QmpRun(m.qmp_fd.get(),
                         {R"({"execute":"qmp_capabilities"})", R"({"execute":"stop"})",
                          kQmpIgnoreShared},
                         left())
                      .status()
                      .WithContext("template: stop"));
  RETURN_IF_ERROR(QmpRun(m.qmp_fd.get(),
                         {R"({"execute":"getfd","arguments":{"fdname":"state"}})"}, left(),
                         {state.get()})
                      .status()
                      .WithContext("template: pass the state file"));
  RETURN_IF_ERROR(
      QmpRun(m.qmp_fd.get(), {R"({"execute":"migrate","arguments":{"uri":"fd:state"}})"}, left())
          .status()
          .WithContext("template: save"));
  for (;;) {
    ASSIGN_OR_RETURN(std::string reply,
                     QmpRun(m.qmp_fd.get(), {R"({"execute":"query-migrate"})"}, left()));
    if (reply.find("\"completed\"") != std::string::npos) return reply;
    if (reply.find("\"failed\"") != std::string::npos) {
      return Internal("template: QEMU could not save the machine: " +
                      base::TerminalSafe(reply, 300));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return DeadlineExceeded("template: saving took longer than " +
                              std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

namespace {

// Holds <root>/<key>.lock: one process makes a template, the others wait and then use it.
class TemplateLock {
 public:
  static StatusOr<TemplateLock> Take(const std::string& key, std::chrono::milliseconds timeout) {
    std::string root = TemplateRoot();
    ::mkdir(root.c_str(), 0700);
    std::string path = root + "/" + key + ".lock";
    base::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!fd.valid()) return base::ErrnoStatus("template: open " + path);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) return base::ErrnoStatus("template: lock " + path);
      if (std::chrono::steady_clock::now() >= deadline) {
        return DeadlineExceeded("template: another process has been making " + key + " for " +
                                std::to_string(timeout.count()) + " ms");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return TemplateLock(std::move(fd));
  }

 private:
  explicit TemplateLock(base::UniqueFd fd) : fd_(std::move(fd)) {}
  base::UniqueFd fd_;  // closing it unlocks
};

}  // namespace

StatusOr<TemplateInfo> Machine::MakeTemplate(const VmConfig& config, const QemuLaunch& launch,
                                             const std::string& key) {
  ASSIGN_OR_RETURN(TemplateLock lock, TemplateLock::Take(key, config.start_timeout));
  auto found = FindTemplate(key);
  if (found.ok() || found.status().code() != StatusCode::kNotFound) return found;
  PruneTemplates();
  auto started = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::string dir, base::MakeTempDir(TemplateRoot(), ".making-" + key + "-"));
  QemuLaunch shared = launch;
  shared.memory_file = dir + "/memory";
  shared.share_memory = true;
  auto made = [&]() -> Status {
    ASSIGN_OR_RETURN(auto machine, Launch(config, shared, -1));
    RETURN_IF_ERROR(machine->WaitForAgent(config.start_timeout));
    RETURN_IF_ERROR(machine->SaveState(dir + "/state", config.start_timeout).status());
    return machine->Destroy();
  }();
  if (!made.ok()) {
    (void)base::RemoveTree(dir);
    return made.WithContext("make vm template");
  }
  TemplateInfo info;
  info.key = key;
  info.home = config.home;
  info.image_tree = config.image_tree;
  info.accel = launch.accel == Accelerator::kKvm ? "kvm" : "tcg";
  info.memory_mib = config.memory_mib;
  info.cpus = config.cpus;
  info.disk_mib = config.disk_mib;
  RETURN_IF_ERROR(CommitTemplate(dir, info).WithContext("make vm template"));
  auto made_info = FindTemplate(key);
  CODEBOX_LOG(kInfo, "vm: made template " << key << " for " << config.image_tree << " in "
                                          << Millis(std::chrono::steady_clock::now() - started)
                                          << " (state "
                                          << (made_info.ok() ? made_info->state_bytes : 0)
                                          << " bytes)");
  return made_info;
}

StatusOr<std::unique_ptr<Machine>> Machine::Restore(const VmConfig& config,
                                                    const QemuLaunch& launch, bool park) {
  ASSIGN_OR_RETURN(std::string key, TemplateKey(launch));
  auto found = FindTemplate(key);
  if (!found.ok() && found.status().code() == StatusCode::kNotFound) {
    found = MakeTemplate(config, launch, key);
  } else if (!found.ok()) {
    // Damaged: gone, so that the next box makes it anew; this one boots.
    (void)RemoveTemplate(key);
  }
  if (!found.ok()) return found.status();
  std::string state_path = found->dir + "/state";
  base::UniqueFd state(::open(state_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!state.valid()) return base::ErrnoStatus("restore: open " + state_path);
  QemuLaunch clone = launch;
  clone.memory_file = found->dir + "/memory";
  clone.share_memory = false;
  clone.incoming = true;
  ASSIGN_OR_RETURN(auto machine, Launch(config, clone, state.get()));
  state.reset();
  Status restored = machine->RestoreState(config.start_timeout, park);
  if (!restored.ok()) {
    // A template QEMU cannot load is no use to the next box either.
    (void)RemoveTemplate(key);
    return restored;
  }
  machine->impl_->template_key = key;
  TouchTemplate(*found);
  return machine;
}

}  // namespace codebox::vm
