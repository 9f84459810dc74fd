// A hostile codebox-agent: runs as PID 1 of a real jail box in place of the agent (as box code
// that took the agent over would) and attacks the host through the protocol. Self-contained
// (no codebox library, no sanitizer, static) so that it runs inside any box image. What it does
// for an exec is chosen by argv[0]:
//   flood         50 MiB of stdout frames, then an exit that claims nothing was truncated
//   mistyped      an exit whose exit_code is the string "zero"
//   second-exit   two exits on the same stream
//   foreign-exit  an exit on a stream the host never opened
//   started-twice two `started` events, then an exit
// mkdir, kill and shutdown are answered like the real agent; read_file with a file event
// claiming 4 EiB followed by 16 MiB of data; list_processes with a table of 300 entries (in one
// frame under the frame limit); attach with 50 MiB of stdout, then an exit.
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

namespace {

constexpr int kFd = 3;
using Json = nlohmann::json;

void ReadExact(char* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(kFd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) ::_exit(0);
    got += static_cast<size_t>(r);
  }
}

uint32_t U32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

struct Frame {
  uint32_t stream;
  uint8_t type;
  std::string payload;
};

Frame ReadFrame() {
  char header[12];
  ReadExact(header, sizeof header);
  Frame f{U32(header + 4), static_cast<uint8_t>(header[8]), std::string(U32(header), '\0')};
  if (!f.payload.empty()) ReadExact(f.payload.data(), f.payload.size());
  return f;
}

void Send(uint32_t stream, uint8_t type, const std::string& payload) {
  std::string frame(12, '\0');
  for (int i = 0; i < 4; ++i) {
    frame[i] = static_cast<char>((payload.size() >> (8 * i)) & 0xff);
    frame[4 + i] = static_cast<char>((stream >> (8 * i)) & 0xff);
  }
  frame[8] = static_cast<char>(type);
  frame += payload;
  size_t off = 0;
  while (off < frame.size()) {
    ssize_t n = ::write(kFd, frame.data() + off, frame.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(0);  // the host hung up
    off += static_cast<size_t>(n);
  }
}

void Event(uint32_t stream, const Json& event) { Send(stream, 2, event.dump()); }

Json Exit(int code) {
  return Json{{"event", "exit"},    {"exit_code", code},         {"signal", 0},
              {"timed_out", false}, {"output_truncated", false}, {"duration_ms", 1},
              {"out_of_memory", false}};
}

}  // namespace

int main() {
  ReadFrame();  // the host's hello
  Send(0, 1, Json{{"protocol", 1}, {"agent", "hostile"}, {"pid", ::getpid()}}.dump());
  for (;;) {
    Frame f = ReadFrame();
    if (f.type != 2) continue;  // stdin, data
    Json req = Json::parse(f.payload, nullptr, /*allow_exceptions=*/false);
    if (!req.is_object() || !req.contains("op") || !req["op"].is_string()) continue;
    const std::string op = req["op"].get<std::string>();
    if (op == "mkdir" || op == "kill") {
      Event(f.stream, Json{{"event", "done"}});
    } else if (op == "shutdown") {
      Event(f.stream, Json{{"event", "done"}});
      return 0;
    } else if (op == "read_file") {
      Event(f.stream, Json{{"event", "file"}, {"size", uint64_t{1} << 62}, {"mode", 420}});
      const std::string chunk(256u << 10, 'h');
      for (int i = 0; i < 64; ++i) Send(f.stream, 6, chunk);
      Send(f.stream, 6, "");
    } else if (op == "list_processes") {
      Json table = Json::array();
      const Json argv(8, std::string(128, 'a'));
      for (int pid = 1; pid <= 300; ++pid) {
        table.push_back(Json{{"pid", pid}, {"argv", argv}, {"tty", false}, {"background", true},
                             {"started_unix_ms", 0}, {"running", true}, {"stdout_bytes", 0},
                             {"stderr_bytes", 0}, {"dropped_stdout", 0}, {"dropped_stderr", 0}});
      }
      Event(f.stream, Json{{"event", "processes"}, {"processes", table}});
    } else if (op == "attach") {
      const std::string chunk(256u << 10, 'y');
      for (int i = 0; i < 200; ++i) Send(f.stream, 4, chunk);  // 50 MiB
      Event(f.stream, Exit(0));
    } else if (op == "exec") {
      std::string attack;
      if (req.contains("argv") && req["argv"].is_array() && !req["argv"].empty() &&
          req["argv"][0].is_string()) {
        attack = req["argv"][0].get<std::string>();
      }
      if (attack == "flood") {
        const std::string chunk(256u << 10, 'x');
        for (int i = 0; i < 200; ++i) Send(f.stream, 4, chunk);  // 50 MiB
        Event(f.stream, Exit(0));
      } else if (attack == "mistyped") {
        Json bad = Exit(0);
        bad["exit_code"] = "zero";
        Event(f.stream, bad);
      } else if (attack == "second-exit") {
        Event(f.stream, Exit(0));
        Event(f.stream, Exit(1));
      } else if (attack == "started-twice") {
        Event(f.stream, Json{{"event", "started"}, {"pid", 7}});
        Event(f.stream, Json{{"event", "started"}, {"pid", 8}});
        Event(f.stream, Exit(0));
      } else if (attack == "foreign-exit") {
        Event(f.stream + 1000, Exit(0));
      } else {
        Event(f.stream, Exit(0));
      }
    } else {
      Event(f.stream,
            Json{{"event", "error"}, {"code", "invalid_argument"}, {"message", "no"}});
    }
  }
}
