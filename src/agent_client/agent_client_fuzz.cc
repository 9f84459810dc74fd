// libFuzzer target: a hostile agent against a real AgentClient over a socketpair.
// The fuzz input scripts what the "agent" sends after its hello: raw frames of any type on any
// stream, control events built from templates with wrong types, absurd values and missing or
// extra fields, floods of output, and bare garbage. Meanwhile the client runs an exec (some on
// a tty, resized once), a read_file and a list_dir with short deadlines, and pumps an egress
// stream for a moment. The process must never crash, abort, leak or hang; each input runs in
// milliseconds.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>

#include "agent_client/agent_client.h"
#include "base/io.h"
#include "protocol/frame.h"
#include "protocol/message.h"

namespace {

using namespace std::chrono_literals;
using codebox::base::WriteAll;
using codebox::protocol::EncodeFrame;
using codebox::protocol::FrameType;
using codebox::protocol::Json;

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t U16() { return static_cast<uint16_t>(Byte() | (Byte() << 8)); }
  std::string Bytes(size_t n) {
    n = std::min(n, size_ - std::min(pos_, size_));
    std::string out(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

uint32_t Stream(uint8_t sel) {
  switch (sel & 0x0f) {
    case 0:
      return 0;
    case 7:
      return 2;
    case 8:
      return 0xffffffffu;
    case 9:
      return 1001;
    default:
      return 2u * (sel % 6u) + 1u;  // 1, 3, 5, 7, 9, 11: the ones the client opens
  }
}

// A value of any JSON type, mostly numbers at the edges of the ranges.
Json Value(Input& in) {
  static const int64_t kInts[] = {0,
                                  1,
                                  -1,
                                  2,
                                  9,
                                  64,
                                  65,
                                  255,
                                  256,
                                  -2,
                                  420,
                                  4095,
                                  4096,
                                  1 << 20,
                                  int64_t{1} << 40,
                                  int64_t{1} << 62,
                                  std::numeric_limits<int64_t>::max(),
                                  std::numeric_limits<int64_t>::min()};
  uint8_t b = in.Byte();
  switch (b % 8) {
    case 0:
      return "zero";
    case 1:
      return (b & 0x10) != 0;
    case 2:
      return nullptr;
    case 3:
      return 1.5;
    case 4:
      return std::numeric_limits<uint64_t>::max();
    case 5:
      return Json::array({1, 2});
    default:
      return kInts[(b >> 3) % (sizeof kInts / sizeof kInts[0])];
  }
}

// A field: usually a plausible value, sometimes a hostile one, sometimes absent.
void Field(Input& in, Json& j, const char* name, Json plausible) {
  uint8_t b = in.Byte();
  if (b < 160) {
    j[name] = std::move(plausible);
  } else if (b < 240) {
    j[name] = Value(in);
  }  // else: missing
}

std::string Event(Input& in) {
  uint8_t which = in.Byte();
  Json j = Json::object();
  switch (which % 9) {
    case 0:
      j["event"] = "exit";
      Field(in, j, "exit_code", 0);
      Field(in, j, "signal", 0);
      Field(in, j, "timed_out", false);
      Field(in, j, "output_truncated", false);
      Field(in, j, "duration_ms", 3);
      Field(in, j, "out_of_memory", false);
      break;
    case 1:
      j["event"] = "done";
      break;
    case 2:
      j["event"] = "file";
      Field(in, j, "size", in.U16());
      Field(in, j, "mode", 0644);
      break;
    case 3: {
      j["event"] = "entries";
      Json list = Json::array();
      int n = in.Byte() % 40;
      for (int i = 0; i < n; ++i) {
        Json e = Json::object();
        Field(in, e, "name", "f" + std::to_string(i));
        Field(in, e, "type", (i % 2) ? "file" : "dir");
        Field(in, e, "size", i);
        Field(in, e, "mode", 0644);
        list.push_back(std::move(e));
      }
      j["entries"] = std::move(list);
      Field(in, j, "more", (which & 0x80) != 0);
      break;
    }
    case 4:
      j["event"] = "error";
      Field(in, j, "code", (which & 0x80) ? "not_found" : "protocol_error");
      Field(in, j, "message", "no such thing\x1b[2J");
      break;
    case 5:
      j["event"] = Value(in);
      break;
    case 6:
      j["event"] = "connected";
      break;
    case 7:
      j["event"] = "ack";
      Field(in, j, "bytes", in.U16());
      break;
    default:
      j["event"] = in.Bytes(in.Byte() % 8);
      break;
  }
  if (which & 0x40) j["extra"] = Value(in);
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Reads and drops what the client sends until `requests` control frames have been seen (or
// 200 ms pass without any).
void Drain(int fd, codebox::protocol::FrameDecoder& decoder, int requests, int timeout_ms) {
  char buf[65536];
  int seen = 0;
  while (seen < requests) {
    auto f = decoder.Next();
    if (!f.ok()) return;
    if (f->has_value()) {
      if ((**f).type == FrameType::kControl || (**f).type == FrameType::kHello) ++seen;
      continue;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return;
    decoder.Feed(std::string_view(buf, static_cast<size_t>(n)));
  }
}

void PlayAgent(int fd, const uint8_t* data, size_t size) {
  Input in(data, size);
  uint8_t mode = in.Byte();
  codebox::protocol::FrameDecoder decoder;
  Drain(fd, decoder, 1, 500);  // the client's hello
  if (mode & 0x04) {
    if (!WriteAll(fd, EncodeFrame(FrameType::kHello, 0, in.Bytes(in.Byte()))).ok()) return;
  } else if (!WriteAll(fd, EncodeFrame(FrameType::kHello, 0, R"({"protocol":1,"agent":"fuzz"})"))
                  .ok()) {
    return;
  }
  Drain(fd, decoder, 4, 100);  // the four requests
  size_t flood_left = 8u << 20;
  while (!in.empty()) {
    uint8_t kind = in.Byte();
    std::string out;
    switch (kind % 4) {
      case 0: {  // a raw frame of any type
        auto type = static_cast<FrameType>(in.Byte() % 8);
        uint32_t stream = Stream(in.Byte());
        out = EncodeFrame(type, stream, in.Bytes(in.U16() % 2048));
        break;
      }
      case 1: {  // a control event on some stream
        uint32_t stream = Stream(in.Byte());
        out = EncodeFrame(FrameType::kControl, stream, Event(in));
        break;
      }
      case 2: {  // a flood of output or file data
        static const FrameType kTypes[] = {FrameType::kStdout, FrameType::kStderr,
                                           FrameType::kData};
        FrameType type = kTypes[in.Byte() % 3];
        uint32_t stream = Stream(in.Byte());
        size_t count = in.Byte() % 32;
        std::string chunk(64u << 10, 'f');
        for (size_t i = 0; i < count && flood_left >= chunk.size();
             ++i, flood_left -= chunk.size()) {
          codebox::protocol::AppendFrame(&out, type, stream, chunk);
        }
        break;
      }
      default:  // bare bytes: partial headers, garbage
        out = in.Bytes(in.Byte() % 32);
        break;
    }
    if (!WriteAll(fd, out).ok()) return;
  }
  if (mode & 0x01) ::shutdown(fd, SHUT_WR);
  // Then answer nothing more: the client's deadlines end what is still open.
  Drain(fd, decoder, std::numeric_limits<int>::max(), 1000);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace codebox::protocol;
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
  codebox::base::UniqueFd client_fd(fds[0]);
  codebox::base::UniqueFd agent_fd(fds[1]);
  std::thread agent([&] { PlayAgent(agent_fd.get(), data, size); });
  {
    auto client = AgentClient::Connect(std::move(client_fd), 300ms);
    if (client.ok()) {
      (*client)->set_idle_timeout(20ms);
      const bool exec_timeout = size > 0 && (data[0] & 0x02);
      // A tty exec: a stderr frame on it must end the connection, and resize waits too.
      const bool exec_tty = size > 0 && (data[0] & 0x08);
      std::thread exec([&] {
        ExecRequest req;
        req.exec.argv = {"true"};
        req.exec.output_limit = 100000;
        req.exec.timeout = exec_timeout ? 30ms : codebox::kNoTimeout;
        if (exec_tty) req.exec.tty = msg::TerminalSize{24, 80};
        std::string seen;
        req.on_stdout = [&seen](std::string_view s) { seen.append(s); };
        auto running = (*client)->StartExec(req);
        if (!running.ok()) return;
        if (exec_tty) (void)(*running)->Resize({50, 132});
        auto r = (*running)->Wait();
        if (r.ok() && (r->stdout_data.size() > 100000 || r->stderr_data.size() > 100000))
          std::abort();
        if (r.ok() && exec_tty && !r->stderr_data.empty()) std::abort();
        if (seen.size() > 100000) std::abort();
      });
      std::thread read([&] {
        auto r = (*client)->ReadFile("/f", 200000);
        if (r.ok() && r->size() > 200000) std::abort();
      });
      std::thread list([&] {
        auto r = (*client)->ListDir("/d", 100, 1u << 20);
        if (r.ok() && r->size() > 100) std::abort();
      });
      std::thread egress([&] {
        auto stream = (*client)->AcceptEgress();
        if (!stream.ok()) return;
        auto end = std::chrono::steady_clock::now() + 30ms;
        while (std::chrono::steady_clock::now() < end) {
          pollfd p{(*stream)->wake_fd(), POLLIN, 0};
          ::poll(&p, 1, 5);
          EgressStream::State st = (*stream)->Take();
          if (st.data.size() > msg::kEgressWindow) std::abort();
          if (st.ended) break;
          if (!st.data.empty()) (void)(*stream)->Ack(st.data.size());
          if (st.send_credit > 0) {
            (void)(*stream)->Send(std::string(std::min<uint64_t>(st.send_credit, 3000), 's'));
          }
        }
      });
      exec.join();
      read.join();
      list.join();
      egress.join();
    }
  }  // the client closes the connection: the agent thread sees EOF
  ::shutdown(agent_fd.get(), SHUT_RDWR);
  agent.join();
  return 0;
}
