// The process table as a hijacked agent tells it (docs/protocol.md, "Processes"): the host
// bounds the list, the names and the counts, and a `started` out of place ends the connection.
#include <gtest/gtest.h>

#include <string>

#include "tests/agent/hostile_agent.h"

namespace codebox::testing {
namespace {

Json Process(int pid) {
  return Json{{"pid", pid},
              {"argv", {"sleep", "1"}},
              {"tty", false},
              {"background", true},
              {"started_unix_ms", 1},
              {"running", true},
              {"stdout_bytes", 0},
              {"stderr_bytes", 0},
              {"dropped_stdout", 0},
              {"dropped_stderr", 0}};
}

// ListProcesses against an agent that answers with `processes` as its list.
Status ListAgainst(const Json& processes) {
  HostileAgent agent([processes](HostileAgent& a) {
    auto [stream, req] = a.NextRequest();
    a.Event(stream, Json{{"event", "processes"}, {"processes", processes}});
  });
  auto client = agent.Connect();
  if (!client) return Internal("no client");
  return client->ListProcesses().status();
}

TEST(HostileTableTest, AnHonestListIsRead) {
  EXPECT_TRUE(ListAgainst(Json::array({Process(7), Process(8)})).ok());
}

TEST(HostileTableTest, TooManyProcessesAreAViolation) {
  Json many = Json::array();
  for (int i = 1; i <= 257; ++i) many.push_back(Process(i));
  ExpectViolation(ListAgainst(many), "lists more than 256");
}

TEST(HostileTableTest, LongOrManyArgumentsAreViolations) {
  Json long_arg = Process(7);
  long_arg["argv"] = {std::string(129, 'x')};
  ExpectViolation(ListAgainst(Json::array({long_arg})), "too long argument");
  Json many_args = Process(7);
  many_args["argv"] = Json::array();
  for (int i = 0; i < 9; ++i) many_args["argv"].push_back("a");
  ExpectViolation(ListAgainst(Json::array({many_args})), "too many arguments");
}

TEST(HostileTableTest, BadFieldsAreViolationsNamingThem) {
  Json negative = Process(7);
  negative["stdout_bytes"] = -1;
  ExpectViolation(ListAgainst(Json::array({negative})), "stdout_bytes");
  Json no_pid = Process(0);
  ExpectViolation(ListAgainst(Json::array({no_pid})), "pid");
  Json ended_running = Process(7);
  ended_running["exit"] = ExitEvent(0);
  ended_running["exit"].erase("event");
  ExpectViolation(ListAgainst(Json::array({ended_running})), "an exit goes with running false");
  Json unknown = Process(7);
  unknown["evil"] = true;
  ExpectViolation(ListAgainst(Json::array({unknown})), "evil");
}

TEST(HostileTableTest, StartedTwiceOrAfterOutputEndsTheConnection) {
  for (const char* second : {"started", "stdout"}) {
    HostileAgent agent([second](HostileAgent& a) {
      auto [stream, req] = a.NextRequest();
      if (std::string(second) == "stdout") a.Send(FrameType::kStdout, stream, "x");
      a.Event(stream, Json{{"event", "started"}, {"pid", 5}});
      a.Event(stream, Json{{"event", "started"}, {"pid", 6}});
    });
    auto client = agent.Connect();
    ASSERT_TRUE(client);
    auto r = client->Exec(True());
    ASSERT_FALSE(r.ok());
    ExpectViolation(r.status(), "started on exec stream");
  }
}

TEST(HostileTableTest, StartedOnAnAttachStreamEndsTheConnection) {
  HostileAgent agent([](HostileAgent& a) {
    auto [stream, req] = a.NextRequest();
    a.Event(stream, Json{{"event", "started"}, {"pid", 5}});
  });
  auto client = agent.Connect();
  ASSERT_TRUE(client);
  protocol::AttachRequest attach;
  attach.pid = 5;
  auto attached = client->Attach(attach);
  ASSERT_TRUE(attached.ok());
  auto r = (*attached)->Wait();
  ASSERT_FALSE(r.ok());
  ExpectViolation(r.status(), "started on exec stream");
}

TEST(HostileTableTest, AttachOutputPastTheHostsLimitIsCut) {
  HostileAgent agent([](HostileAgent& a) {
    auto [stream, req] = a.NextRequest();
    for (int i = 0; i < 64; ++i) a.Send(FrameType::kStdout, stream, std::string(64 << 10, 'x'));
    a.Event(stream, ExitEvent(0));
  });
  auto client = agent.Connect();
  ASSERT_TRUE(client);
  protocol::AttachRequest attach;
  attach.pid = 5;
  attach.output_limit = 1 << 20;
  auto attached = client->Attach(attach);
  ASSERT_TRUE(attached.ok());
  auto r = (*attached)->Wait();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data.size(), 1u << 20);
  EXPECT_TRUE(r->output_truncated);
}

}  // namespace
}  // namespace codebox::testing
