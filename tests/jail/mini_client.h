// A small synchronous speaker of docs/protocol.md for the jail tests: hello, then one exec at a
// time. Independent of protocol::AgentClient so the jail is tested on its own.
#ifndef CODEBOX_TESTS_JAIL_MINI_CLIENT_H_
#define CODEBOX_TESTS_JAIL_MINI_CLIENT_H_

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "base/io.h"
#include "base/unique_fd.h"
#include "codebox/status.h"
#include "protocol/frame.h"
#include "protocol/message.h"

namespace codebox::jail::testing {

struct MiniResult {
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  bool out_of_memory = false;
  std::string out, err;
};

class MiniClient {
 public:
  explicit MiniClient(base::UniqueFd fd) : fd_(std::move(fd)) {}

  Status Hello() {
    RETURN_IF_ERROR(
        Send(protocol::FrameType::kHello, 0, R"({"protocol": 1, "client": "jail_test"})"));
    ASSIGN_OR_RETURN(protocol::Frame f, Read(std::chrono::seconds(10)));
    if (f.type != protocol::FrameType::kHello) return ProtocolError("expected hello");
    return Status::Ok();
  }

  StatusOr<MiniResult> Exec(const std::vector<std::string>& argv, int timeout_ms = 20000) {
    uint32_t stream = next_stream_;
    next_stream_ += 2;
    protocol::Json req = {{"op", "exec"},
                          {"argv", argv},
                          {"env", {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", "/root"}}},
                          {"cwd", "/work"},
                          {"stdin", "none"},
                          {"timeout_ms", timeout_ms},
                          {"output_limit", 1 << 20}};
    RETURN_IF_ERROR(Send(protocol::FrameType::kControl, stream, protocol::DumpControl(req)));
    MiniResult r;
    for (;;) {
      ASSIGN_OR_RETURN(protocol::Frame f, Read(std::chrono::milliseconds(timeout_ms + 10000)));
      if (f.stream != stream) continue;
      if (f.type == protocol::FrameType::kStdout) r.out += f.payload;
      if (f.type == protocol::FrameType::kStderr) r.err += f.payload;
      if (f.type != protocol::FrameType::kControl) continue;
      ASSIGN_OR_RETURN(protocol::Json ev, protocol::ParseControl(f.payload));
      std::string kind = ev.value("event", "");
      if (kind == "error") return IoError("agent: " + ev.value("message", ""));
      if (kind != "exit") continue;
      r.exit_code = ev.value("exit_code", -1);
      r.signal = ev.value("signal", 0);
      r.timed_out = ev.value("timed_out", false);
      r.out_of_memory = ev.value("out_of_memory", false);
      return r;
    }
  }

  // `sh -c script`, for brevity in tests.
  StatusOr<MiniResult> Sh(const std::string& script, int timeout_ms = 20000) {
    return Exec({"/bin/sh", "-c", script}, timeout_ms);
  }

 private:
  Status Send(protocol::FrameType type, uint32_t stream, const std::string& payload) {
    return base::WriteAll(fd_.get(), protocol::EncodeFrame(type, stream, payload));
  }

  StatusOr<protocol::Frame> Read(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      ASSIGN_OR_RETURN(auto next, decoder_.Next());
      if (next.has_value()) return std::move(*next);
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return DeadlineExceeded("no frame from the agent");
      pollfd pfd{fd_.get(), POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[65536];
      ssize_t n = ::read(fd_.get(), buf, sizeof buf);
      if (n == 0) return BoxCrashed("agent connection closed");
      if (n < 0) return base::ErrnoStatus("read agent");
      decoder_.Feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }

  base::UniqueFd fd_;
  protocol::FrameDecoder decoder_;
  uint32_t next_stream_ = 1;
};

}  // namespace codebox::jail::testing

#endif  // CODEBOX_TESTS_JAIL_MINI_CLIENT_H_
