// Copy-out against a lying agent (in a vm, guest root owns the agent): a fake agent on a
// socketpair answers list_dir and read_file with hostile names, sizes and endless trees.
#include "box/copy.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <functional>
#include <thread>

#include "base/io.h"
#include "protocol/frame.h"
#include "protocol/message.h"

namespace codebox::box {
namespace {

using protocol::FrameType;
using protocol::Json;

// Serves one connection on its own thread: hello, then `answer` for each request.
class FakeAgent {
 public:
  using Answer = std::function<void(FakeAgent&, uint32_t stream, const Json& request)>;

  explicit FakeAgent(Answer answer) : answer_(std::move(answer)) {
    ::signal(SIGPIPE, SIG_IGN);  // writes after the host hung up fail instead
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    host_.reset(fds[0]);
    mine_.reset(fds[1]);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeAgent() {
    ::shutdown(mine_.get(), SHUT_RDWR);
    thread_.join();
  }

  base::UniqueFd TakeHostFd() { return std::move(host_); }

  // False once the host has gone (so a flood stops).
  bool Send(FrameType type, uint32_t stream, std::string_view payload) {
    return base::WriteAll(mine_.get(), protocol::EncodeFrame(type, stream, payload)).ok();
  }
  void Control(uint32_t stream, const Json& j) {
    Send(FrameType::kControl, stream, protocol::DumpControl(j));
  }
  void NotFound(uint32_t stream) {
    Control(stream, Json{{"event", "error"}, {"code", "not_found"}, {"message", "no"}});
  }

 private:
  void Serve() {
    Send(FrameType::kHello, 0,
         protocol::DumpControl(Json{{"protocol", protocol::kProtocolVersion}}));
    protocol::FrameDecoder decoder;
    char buf[65536];
    for (;;) {
      auto next = decoder.Next();
      if (!next.ok()) return;
      if (next->has_value()) {
        const protocol::Frame& frame = **next;
        if (frame.type != FrameType::kControl || frame.stream == 0) continue;
        auto request = protocol::ParseControl(frame.payload);
        if (request.ok()) answer_(*this, frame.stream, *request);
        continue;
      }
      ssize_t n = ::read(mine_.get(), buf, sizeof buf);
      if (n <= 0) return;
      decoder.Feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }

  Answer answer_;
  base::UniqueFd host_, mine_;
  std::thread thread_;
};

std::string FreshDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/copy_fake_" + name + "_" + std::to_string(::getpid());
  std::system(("rm -rf '" + dir + "'").c_str());
  EXPECT_EQ(::mkdir(dir.c_str(), 0755), 0);
  return dir;
}

Json FileEntry(const std::string& name, uint64_t size = 1) {
  return Json{{"name", name}, {"type", "file"}, {"size", size}, {"mode", 0644}};
}

Status CopyFrom(FakeAgent& fake, const std::string& box_path, const std::string& host_path,
                CopyOutOptions options) {
  auto client = protocol::AgentClient::Connect(fake.TakeHostFd(), std::chrono::seconds(5));
  if (!client.ok()) return client.status();
  return CopyBoxToHost(**client, box_path, host_path, options);
}

CopyOutOptions Limit(uint64_t max_bytes) {
  CopyOutOptions o;
  o.max_bytes = max_bytes;
  return o;
}

TEST(CopyOutFakeAgentTest, MoreBytesThanClaimedStopAtTheLimit) {
  FakeAgent fake([](FakeAgent& a, uint32_t stream, const Json& req) {
    if (req["op"] == "list_dir") return a.NotFound(stream);
    // Claims 10 bytes, then sends 8 MiB.
    a.Control(stream, Json{{"event", "file"}, {"size", 10}, {"mode", 06755}});
    std::string chunk(64 << 10, 'x');
    for (int i = 0; i < 128; ++i) {
      if (!a.Send(FrameType::kData, stream, chunk)) return;
    }
    a.Send(FrameType::kData, stream, {});
  });
  std::string dir = FreshDir("liar");
  Status st = CopyFrom(fake, "/work/f", dir + "/sub/f", Limit(1 << 20));
  ASSERT_EQ(st.code(), StatusCode::kLimitExceeded) << st.ToString();
  EXPECT_NE(st.message().find("/work/f: more than 1 MiB is over the copy-out limit of 1 MiB"),
            std::string::npos)
      << st.message();
  EXPECT_TRUE(base::ListDirectory(dir).empty()) << "left on the host after the limit";
}

TEST(CopyOutFakeAgentTest, NamesThatClimbOutAreRefused) {
  for (std::string bad :
       {"../escape", "/etc/passwd", ".", "..", "", "a/b", "a\nb", "a\x1b]0;x\a"}) {
    FakeAgent fake([bad](FakeAgent& a, uint32_t stream, const Json& req) {
      if (req["op"] == "list_dir" && req["path"] == "/d") {
        return a.Control(stream, Json{{"event", "entries"},
                                      {"entries", Json::array({FileEntry("ok"), FileEntry(bad)})}});
      }
      if (req["op"] == "list_dir") return a.NotFound(stream);
      a.Control(stream, Json{{"event", "file"}, {"size", 1}, {"mode", 0644}});
      a.Send(FrameType::kData, stream, "x");
      a.Send(FrameType::kData, stream, {});
    });
    std::string dir = FreshDir("names");
    Status st = CopyFrom(fake, "/d", dir + "/out/d", Limit(1 << 20));
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\x1b'), std::string::npos) << st.message();
    EXPECT_TRUE(base::ListDirectory(dir).empty()) << "left behind for " << bad;
    struct stat s;
    EXPECT_NE(::lstat((dir + "/escape").c_str(), &s), 0);
  }
}

TEST(CopyOutFakeAgentTest, EndlessDirectoriesStopAndLeaveNothing) {
  FakeAgent fake([](FakeAgent& a, uint32_t stream, const Json& req) {
    if (req["op"] != "list_dir") return a.NotFound(stream);
    a.Control(
        stream,
        Json{{"event", "entries"},
             {"entries",
              Json::array({Json{{"name", "a"}, {"type", "dir"}, {"size", 0}, {"mode", 0755}}})}});
  });
  std::string dir = FreshDir("endless");
  Status st = CopyFrom(fake, "/d", dir + "/d", Limit(1 << 20));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("deep"), std::string::npos) << st.message();
  EXPECT_TRUE(base::ListDirectory(dir).empty());
}

TEST(CopyOutFakeAgentTest, TooManyEntriesStopAndLeaveNothing) {
  FakeAgent fake([](FakeAgent& a, uint32_t stream, const Json& req) {
    if (req["op"] == "list_dir" && req["path"] == "/d") {
      Json entries = Json::array();
      for (int i = 0; i < 500; ++i) entries.push_back(FileEntry("f" + std::to_string(i), 0));
      return a.Control(stream, Json{{"event", "entries"}, {"entries", entries}});
    }
    if (req["op"] == "list_dir") return a.NotFound(stream);
    a.Control(stream, Json{{"event", "file"}, {"size", 0}, {"mode", 0644}});
    a.Send(FrameType::kData, stream, {});
  });
  std::string dir = FreshDir("many");
  ASSERT_EQ(::mkdir((dir + "/d").c_str(), 0755), 0);
  ASSERT_TRUE(base::WriteFile(dir + "/d/mine", "host").ok());
  CopyOutOptions options = Limit(1 << 20);
  options.max_entries = 100;
  Status st = CopyFrom(fake, "/d", dir + "/d", options);
  EXPECT_EQ(st.code(), StatusCode::kLimitExceeded) << st.ToString();
  EXPECT_EQ(base::ListDirectory(dir + "/d"), std::vector<std::string>{"mine"});
}

}  // namespace
}  // namespace codebox::box
