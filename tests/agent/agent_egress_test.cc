// The agent's egress port with the host's EgressStream, end to end: the real agent runs as an
// ordinary child on a socketpair with an ephemeral egress port, and the test plays both the
// program in the box (a TCP client of that port) and the host's bridge.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "agent_harness.h"
#include "egress_test_util.h"
#include "testing/loopback_listener.h"

namespace codebox::testing {
namespace {

using namespace std::chrono_literals;
using protocol::AgentClient;
using protocol::EgressStream;
using protocol::msg::kEgressWindow;

class AgentEgressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto agent = AgentProcess::Start({"--egress-port", "0"});
    ASSERT_TRUE(agent.ok()) << agent.status().ToString();
    agent_ = std::move(*agent);
    auto client = agent_->Connect();
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }

  // Opens an accept stream; the first one also learns the agent's port.
  std::unique_ptr<EgressStream> Accept() {
    auto stream = client_->AcceptEgress();
    if (!stream.ok()) {
      ADD_FAILURE() << stream.status().ToString();
      return nullptr;
    }
    if (port_ == 0) {
      auto port = agent_->EgressPort(5s);
      if (!port.ok()) ADD_FAILURE() << port.status().ToString();
      port_ = port.ok() ? *port : 0;
    }
    return std::move(*stream);
  }

  base::UniqueFd Connect() {
    auto fd = ConnectLoopback(port_);
    if (!fd.ok()) ADD_FAILURE() << fd.status().ToString();
    return fd.ok() ? std::move(*fd) : base::UniqueFd();
  }

  std::unique_ptr<AgentProcess> agent_;
  std::unique_ptr<AgentClient> client_;
  uint16_t port_ = 0;
};

TEST_F(AgentEgressTest, ARequestAndItsAnswerCrossTheStream) {
  auto stream = Accept();
  ASSERT_TRUE(stream);
  EXPECT_TRUE(stream->Take().send_credit == 0) << "no credit before a connection";
  base::UniqueFd program = Connect();
  ASSERT_TRUE(program.valid());
  HostEnd host{*stream};
  ASSERT_TRUE(host.Until([&] { return host.connected; })) << host.status.ToString();

  const std::string request = "CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n";
  ASSERT_TRUE(SendAllBytes(program.get(), request).ok());
  ASSERT_TRUE(host.Until([&] { return host.received.size() == request.size(); }));
  EXPECT_EQ(host.received, request);

  const std::string answer = "HTTP/1.1 200 Connection established\r\n\r\n";
  ASSERT_TRUE(host.Until([&] { return host.sent == answer.size(); }, answer));
  char buf[256];
  ssize_t n = ::recv(program.get(), buf, answer.size(), MSG_WAITALL);
  ASSERT_EQ(n, static_cast<ssize_t>(answer.size()));
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)), answer);
}

// Several MiB each way at once, through the 1 MiB window both ways, byte for byte.
TEST_F(AgentEgressTest, MegabytesFlowBothWaysThroughTheWindow) {
  auto stream = Accept();
  ASSERT_TRUE(stream);
  base::UniqueFd program = Connect();
  ASSERT_TRUE(program.valid());
  const std::string up = RandomBytes(6u << 20, 1);    // program -> host
  const std::string down = RandomBytes(5u << 20, 2);  // host -> program
  Status wrote, read_status;
  std::string got;
  std::thread writer([&] {
    wrote = SendAllBytes(program.get(), up);
    if (wrote.ok()) ::shutdown(program.get(), SHUT_WR);
  });
  std::thread reader([&] {
    auto r = ReadToEof(program.get());
    read_status = r.status();
    if (r.ok()) got = std::move(*r);
  });
  HostEnd host(*stream);
  bool finished = host.Until([&] { return host.ended; }, down, /*send_eof=*/true, 60s);
  writer.join();
  reader.join();
  ASSERT_TRUE(finished) << "received " << host.received.size() << ", sent " << host.sent;
  EXPECT_TRUE(host.status.ok()) << host.status.ToString();
  EXPECT_TRUE(wrote.ok()) << wrote.ToString();
  ASSERT_TRUE(read_status.ok()) << read_status.ToString();
  EXPECT_TRUE(host.box_eof);
  ASSERT_EQ(host.received.size(), up.size());
  EXPECT_TRUE(host.received == up) << "the program's bytes arrived changed";
  ASSERT_EQ(got.size(), down.size());
  EXPECT_TRUE(got == down) << "the host's bytes arrived changed";
  EXPECT_TRUE(client_->connection_status().ok());
}

// The program ends its sending first, then the host answers and ends: a request/response.
TEST_F(AgentEgressTest, ProgramHalfClosesFirstAndStillGetsTheAnswer) {
  auto stream = Accept();
  ASSERT_TRUE(stream);
  base::UniqueFd program = Connect();
  ASSERT_TRUE(program.valid());
  ASSERT_TRUE(SendAllBytes(program.get(), "GET http://a.example/ HTTP/1.0\r\n\r\n").ok());
  ASSERT_EQ(::shutdown(program.get(), SHUT_WR), 0);
  HostEnd host(*stream);
  ASSERT_TRUE(host.Until([&] { return host.box_eof; }));
  EXPECT_EQ(host.received, "GET http://a.example/ HTTP/1.0\r\n\r\n");
  EXPECT_FALSE(host.ended) << "the stream ends only when both sides ended";
  const std::string answer = "HTTP/1.0 200 OK\r\n\r\nhello";
  ASSERT_TRUE(host.Until([&] { return host.ended; }, answer, /*send_eof=*/true));
  EXPECT_TRUE(host.status.ok()) << host.status.ToString();
  auto got = ReadToEof(program.get());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, answer);
}

// The host ends its sending first; the program sees EOF and may still send.
TEST_F(AgentEgressTest, HostHalfClosesFirstAndStillGetsTheProgramsBytes) {
  auto stream = Accept();
  ASSERT_TRUE(stream);
  base::UniqueFd program = Connect();
  ASSERT_TRUE(program.valid());
  HostEnd host(*stream);
  ASSERT_TRUE(host.Until([&] { return host.eof_sent; }, "bye", /*send_eof=*/true));
  auto got = ReadToEof(program.get());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "bye");
  host.Step({}, false, 100ms);
  EXPECT_FALSE(host.ended);
  ASSERT_TRUE(SendAllBytes(program.get(), "late words").ok());
  ASSERT_EQ(::shutdown(program.get(), SHUT_WR), 0);
  ASSERT_TRUE(host.Until([&] { return host.ended; }));
  EXPECT_TRUE(host.status.ok()) << host.status.ToString();
  EXPECT_EQ(host.received, "late words");
  EXPECT_TRUE(host.box_eof);
}

// Close (a cancel) resets the program's connection: it must not take it for a clean end.
TEST_F(AgentEgressTest, CloseResetsTheProgramsConnection) {
  auto stream = Accept();
  ASSERT_TRUE(stream);
  base::UniqueFd program = Connect();
  ASSERT_TRUE(program.valid());
  HostEnd host(*stream);
  ASSERT_TRUE(host.Until([&] { return host.connected; }));
  stream->Close();
  stream->Close();  // idempotent
  EXPECT_TRUE(stream->Take().ended);
  auto got = ReadToEof(program.get());
  ASSERT_FALSE(got.ok()) << "read " << got->size() << " bytes and a clean EOF";
  EXPECT_NE(got.status().message().find("reset"), std::string::npos) << got.status().ToString();
  EXPECT_FALSE(stream->Send("x").ok());
  EXPECT_TRUE(client_->connection_status().ok());
}

// 16 accept streams take 16 connections; the 17th waits in the backlog until a new stream
// opens, then gets it with its bytes intact.
TEST_F(AgentEgressTest, TheSeventeenthConnectionWaitsForAStream) {
  constexpr int kStreams = 16;
  std::vector<std::unique_ptr<EgressStream>> streams;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(Accept());
    ASSERT_TRUE(streams.back());
  }
  std::vector<base::UniqueFd> programs;
  for (int i = 0; i <= kStreams; ++i) {
    programs.push_back(Connect());
    ASSERT_TRUE(programs.back().valid()) << i;
    ASSERT_TRUE(SendAllBytes(programs.back().get(), "program " + std::to_string(i) + ";").ok());
  }
  std::vector<HostEnd> hosts;
  for (auto& s : streams) hosts.emplace_back(*s);
  std::set<std::string> seen;
  for (HostEnd& h : hosts) {
    ASSERT_TRUE(h.Until([&] { return h.received.find(';') != std::string::npos; }))
        << h.status.ToString();
    seen.insert(h.received);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kStreams));
  // The 17th connected, but no stream carries it yet.
  std::this_thread::sleep_for(200ms);
  std::string late;
  for (int i = 0; i <= kStreams; ++i) {
    std::string name = "program " + std::to_string(i) + ";";
    if (!seen.count(name)) late = name;
  }
  ASSERT_FALSE(late.empty());
  // One connection ends (closed by the host); a new accept stream takes the waiting one.
  streams[0]->Close();
  auto next = Accept();
  ASSERT_TRUE(next);
  HostEnd h(*next);
  ASSERT_TRUE(h.Until([&] { return h.received.size() >= late.size(); })) << h.status.ToString();
  EXPECT_EQ(h.received, late);
}

// The port is taken: the accept stream ends with an error naming it; the agent goes on.
TEST(AgentEgressPortTest, APortInUseIsAnErrorNamingIt) {
  auto taken = ListenOnLoopback();
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  auto agent = AgentProcess::Start({"--egress-port", std::to_string(taken->port)});
  ASSERT_TRUE(agent.ok()) << agent.status().ToString();
  auto client = (*agent)->Connect();
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto stream = (*client)->AcceptEgress();
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  HostEnd host(**stream);
  ASSERT_TRUE(host.Until([&] { return host.ended; }));
  EXPECT_EQ(host.status.code(), StatusCode::kIoError) << host.status.ToString();
  EXPECT_NE(host.status.message().find("127.0.0.1:" + std::to_string(taken->port)),
            std::string::npos)
      << host.status.ToString();
  EXPECT_TRUE((*client)->MakeDir("/tmp").ok());
}

// When the agent exits, every connection it carried is closed.
TEST_F(AgentEgressTest, TheAgentsExitClosesItsConnections) {
  auto stream = Accept();
  ASSERT_TRUE(stream);
  base::UniqueFd program = Connect();
  ASSERT_TRUE(program.valid());
  HostEnd host(*stream);
  ASSERT_TRUE(host.Until([&] { return host.connected; }));
  stream.reset();
  ASSERT_TRUE(client_->Shutdown(5s).ok());
  ASSERT_NE(agent_->WaitExit(5000), -1);
  auto got = ReadToEof(program.get());
  EXPECT_TRUE(!got.ok() || got->empty()) << "the connection stayed open";
}

// Programs never inherit the listener or a connection: one that did could accept the box's
// connections itself, or read another program's.
TEST_F(AgentEgressTest, ExecsInheritNoEgressSocket) {
  auto carrying = Accept();  // the older stream takes the connection
  auto waiting = Accept();
  ASSERT_TRUE(waiting && carrying);
  base::UniqueFd program = Connect();
  ASSERT_TRUE(program.valid());
  HostEnd host(*carrying);
  ASSERT_TRUE(host.Until([&] { return host.connected; }));
  protocol::ExecRequest r;
  r.exec.argv = {"/bin/sh", "-c", "ls -l /proc/$$/fd"};
  r.exec.env = {{"PATH", "/usr/bin:/bin"}};
  r.exec.timeout = 10s;
  auto res = client_->Exec(r);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_NE(res->stdout_data.find("pipe:"), std::string::npos) << res->stdout_data;
  EXPECT_EQ(res->stdout_data.find("socket:"), std::string::npos) << res->stdout_data;
}

// The caller's own mistakes are errors, not frames that would break the protocol.
TEST_F(AgentEgressTest, CallerMistakesAreInvalidArguments) {
  auto stream = Accept();
  ASSERT_TRUE(stream);
  EXPECT_EQ(stream->Send("early").code(), StatusCode::kFailedPrecondition);
  base::UniqueFd program = Connect();
  ASSERT_TRUE(program.valid());
  HostEnd host(*stream);
  ASSERT_TRUE(host.Until([&] { return host.connected; }));
  EXPECT_EQ(stream->Send(std::string(kEgressWindow + 1, 'x')).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(stream->Ack(1).code(), StatusCode::kInvalidArgument) << "nothing was taken";
  EXPECT_EQ(stream->Ack(0).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(stream->Send(std::string(kEgressWindow, 'x')).ok()) << "exactly the credit";
  EXPECT_TRUE(client_->connection_status().ok());
}

// Whether `data`, found at `offset` of a stream that repeats `block`, is what belongs there.
bool MatchesRepeated(std::string_view data, size_t offset, std::string_view block) {
  while (!data.empty()) {
    size_t at = offset % block.size();
    size_t n = std::min(data.size(), block.size() - at);
    if (data.substr(0, n) != block.substr(at, n)) return false;
    data.remove_prefix(n);
    offset += n;
  }
  return true;
}

// Moves 64 MiB each way (one after the other) and reports the rates: the agent's share of a
// box's download speed. The bytes are checked; the rates only printed (machines differ).
TEST_F(AgentEgressTest, ThroughputEachWay) {
  constexpr size_t kBytes = 64u << 20;
  const std::string block = RandomBytes(1u << 20, 3);
  auto stream = Accept();
  ASSERT_TRUE(stream);
  base::UniqueFd program = Connect();
  ASSERT_TRUE(program.valid());
  HostEnd host(*stream);
  ASSERT_TRUE(host.Until([&] { return host.connected; }));

  // Host -> program (a download), the program checking every block.
  std::string down;
  for (size_t i = 0; i < 8; ++i) down += block;  // 8 MiB, sent 8 times
  size_t got = 0;
  bool same = true;
  std::thread reader([&] {
    std::string buf(1u << 20, '\0');
    while (got < kBytes) {
      ssize_t n = ::recv(program.get(), buf.data(), buf.size(), 0);
      if (n <= 0) return;
      same = same && MatchesRepeated(std::string_view(buf.data(), n), got, block);
      got += static_cast<size_t>(n);
    }
  });
  auto start = std::chrono::steady_clock::now();
  bool sent_all = true;
  for (int round = 0; round < 8 && sent_all; ++round) {
    host.sent = 0;
    sent_all = host.Until([&] { return host.sent == down.size(); }, down);
  }
  if (!sent_all) ::shutdown(program.get(), SHUT_RDWR);  // lets the reader go
  reader.join();
  ASSERT_TRUE(sent_all) << host.status.ToString();
  double down_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(got, kBytes);
  EXPECT_TRUE(same) << "the download arrived changed";

  // Program -> host (an upload).
  start = std::chrono::steady_clock::now();
  std::thread writer([&] {
    for (size_t sent = 0; sent < kBytes; sent += block.size()) {
      if (!SendAllBytes(program.get(), block).ok()) return;
    }
  });
  size_t received = 0;
  bool up_same = true;
  EXPECT_TRUE(host.Until([&] {
    up_same = up_same && MatchesRepeated(host.received, received, block);
    received += host.received.size();
    host.received.clear();
    return received >= kBytes;
  })) << host.status.ToString();
  ::shutdown(program.get(), SHUT_RDWR);  // lets the writer go if the host stopped early
  writer.join();
  double up_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(received, kBytes);
  EXPECT_TRUE(up_same) << "the upload arrived changed";
  std::printf("egress stream throughput: host->program %.0f MB/s, program->host %.0f MB/s\n",
              kBytes / down_s / 1e6, kBytes / up_s / 1e6);
}

}  // namespace
}  // namespace codebox::testing
