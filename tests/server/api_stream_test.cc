// Server-sent events (order, the last event), clients that go away mid-stream, and a box that
// crashes while others keep working.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "tests/server/server_fixture.h"

namespace codebox::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Every test runs over the unix socket and over loopback TCP.
class ApiStreamTest : public ServerFixture, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    tcp_ = GetParam();
    ServerFixture::SetUp();
  }
  // Waits (at most 10 s) for the box to be idle again: no request holds it.
  bool BecomesIdle(const std::string& id) {
    for (auto end = Clock::now() + std::chrono::seconds(10); Clock::now() < end;) {
      auto record = registry_->Get(id);
      if (record.ok() && record->state == "idle") return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Starts a streamed request and drops the connection after its first event.
  void DisconnectAfterFirstEvent(const std::string& target, const std::string& body) {
    http::ClientRequest request;
    request.method = "POST";
    request.target = target;
    request.body = body;
    request.headers = {{"Accept", "text/event-stream"}};
    int events = 0;
    auto r = (tcp_ ? TcpClient() : UnixClient())
                 .SendForEvents(request, [&](std::string_view, std::string_view) {
                   ++events;
                   return Status(StatusCode::kInternal, "the test hangs up");
                 });
    EXPECT_FALSE(r.ok()) << "the callback's error ends the stream";
    EXPECT_EQ(events, 1);
  }

  void ExpectFits(const std::string& schema, const json& value) {
    EXPECT_EQ(openapi_.CheckValue(openapi_.Schema(schema), value, schema), "");
  }
};

// Output of `out` and `err` lines, a pause after each so stdout and stderr interleave in order.
constexpr char kInterleave[] =
    "import sys, time\n"
    "for i in range(3):\n"
    "    print('out', i, flush=True); time.sleep(0.05)\n"
    "    print('err', i, file=sys.stderr, flush=True); time.sleep(0.05)\n";

TEST_P(ApiStreamTest, ExecEventsInOrderThenDone) {
  std::string id = CreateBox();
  ASSERT_FALSE(id.empty());
  json body = {{"argv", {"python3", "-c", kInterleave}}};
  auto events = Stream("/v1/boxes/" + id + "/exec", body.dump());
  ASSERT_GE(events.size(), 3u);
  std::string sequence, out, err;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    ASSERT_TRUE(events[i].name == "stdout" || events[i].name == "stderr") << events[i].name;
    ExpectFits("StreamChunk", events[i].data);
    std::string text = events[i].data["text"];
    sequence += text;
    (events[i].name == "stdout" ? out : err) += text;
  }
  EXPECT_EQ(sequence, "out 0\nerr 0\nout 1\nerr 1\nout 2\nerr 2\n");
  EXPECT_EQ(events.back().name, "done");
  ExpectFits("ExecResult", events.back().data);
  // The output came in the events only: the server held none of it for `done`.
  EXPECT_FALSE(out.empty());
  EXPECT_EQ(events.back().data["stdout"], "") << "done does not repeat the streamed output";
  EXPECT_EQ(events.back().data["stderr"], "");
  EXPECT_EQ(events.back().data["exit_code"], 0);

  // /python and /v1/run stream the same way.
  auto python = Stream("/v1/boxes/" + id + "/python", json({{"code", "print(1)"}}).dump());
  ASSERT_EQ(python.size(), 2u);
  EXPECT_EQ(python[0].data["text"], "1\n");
  EXPECT_EQ(python[1].name, "done");
  auto run = Stream("/v1/run", json({{"code", "print(2)"}}).dump());
  ASSERT_EQ(run.size(), 2u);
  EXPECT_EQ(run[1].name, "done");
  ExpectFits("RunResult", run[1].data);
}

// A UTF-8 character the box writes in two pieces arrives whole in the events (the server holds
// its first bytes back), and bytes that never become a character are U+FFFD once, at the end.
TEST_P(ApiStreamTest, ACharacterCutBetweenChunksArrivesWhole) {
  std::string id = CreateBox();
  ASSERT_FALSE(id.empty());
  json body = {
      {"argv", {"sh", "-c", "printf '\\303'; sleep 0.3; printf '\\251\\n'; printf '\\377\\342'"}}};
  auto events = Stream("/v1/boxes/" + id + "/exec", body.dump());
  ASSERT_GE(events.size(), 2u);
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    ASSERT_EQ(events[i].name, "stdout");
    text += events[i].data["text"].get<std::string>();
  }
  EXPECT_EQ(text, "\u00e9\n\ufffd\ufffd");
  EXPECT_EQ(events.back().name, "done");
  EXPECT_EQ(events.back().data["stdout"], "");
}

TEST_P(ApiStreamTest, RunCodeEventsInOrderThenDone) {
  std::string id = CreateBox();
  ASSERT_FALSE(id.empty());
  json body = {{"code", "print('a', flush=True)\ndisplay('shown')\nprint('b')\n6 * 7"}};
  auto events = Stream("/v1/boxes/" + id + "/run_code", body.dump());
  ASSERT_FALSE(events.empty());
  if (events.back().name == "error" &&
      events.back().data["error"]["code"] == "failed_precondition") {
    GTEST_SKIP() << "no IPython in the image";
  }
  std::vector<std::string> names;
  for (const auto& e : events)
    names.push_back(e.name + ":" +
                    (e.data.contains("text") ? e.data["text"].get<std::string>() : e.data.dump()));
  ASSERT_EQ(events.size(), 5u) << ::testing::PrintToString(names);
  EXPECT_EQ(events[0].name, "stdout");
  EXPECT_EQ(events[0].data["text"], "a\n");
  EXPECT_EQ(events[1].name, "result");
  ExpectFits("CellResult", events[1].data);
  EXPECT_EQ(events[1].data["is_main_result"], false);
  EXPECT_EQ(events[2].name, "stdout");
  EXPECT_EQ(events[3].name, "result");
  EXPECT_EQ(events[3].data["data"]["text/plain"], "42");
  EXPECT_EQ(events[3].data["is_main_result"], true);
  EXPECT_EQ(events[4].name, "done");
  ExpectFits("Execution", events[4].data);
}

TEST_P(ApiStreamTest, ClientGoneMidExecLeavesTheBoxIdle) {
  std::string id = CreateBox();
  ASSERT_FALSE(id.empty());
  auto start = Clock::now();
  json body = {{"argv", {"sh", "-c", "echo started; sleep 60"}}, {"timeout", 120}};
  DisconnectAfterFirstEvent("/v1/boxes/" + id + "/exec", body.dump());
  EXPECT_TRUE(BecomesIdle(id)) << "the exec was left running after its client went away";
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(15));
  // Processes named `sleep` left in the box (this python3 is not one).
  json count = {{"code",
                 "import os\n"
                 "print(sum(1 for p in os.listdir('/proc') if p.isdigit() and "
                 "open('/proc/' + p + '/comm').read().strip() == 'sleep'))"}};
  auto ps = Call("POST", "/v1/boxes/" + id + "/python", "/v1/boxes/{id}/python", count.dump());
  EXPECT_EQ(Json(ps)["stdout"], "0\n") << "the exec's processes were killed";
}

// The processes of a gone client's exec or /python die through the call's own handle, not a
// sweep of /proc for a variable in their environment: clearing it saves none of them.
TEST_P(ApiStreamTest, ClientGoneKillsProcessesThatClearedTheirEnvironment) {
  std::string id = CreateBox();
  ASSERT_FALSE(id.empty());
  json exec = {{"argv", {"env", "-i", "/bin/sh", "-c", "echo started; setsid sleep 60 & sleep 60"}},
               {"timeout", 120}};
  DisconnectAfterFirstEvent("/v1/boxes/" + id + "/exec", exec.dump());
  EXPECT_TRUE(BecomesIdle(id));
  json python = {{"code",
                  "import os, subprocess, time\n"
                  "os.environ.clear()\n"
                  "subprocess.Popen(['/bin/sleep', '60'], env={}, start_new_session=True)\n"
                  "print('started', flush=True)\n"
                  "time.sleep(60)"},
                 {"timeout", 120}};
  DisconnectAfterFirstEvent("/v1/boxes/" + id + "/python", python.dump());
  EXPECT_TRUE(BecomesIdle(id));
  json count = {{"code",
                 "import os\n"
                 "print(sum(1 for p in os.listdir('/proc') if p.isdigit() and "
                 "open('/proc/' + p + '/comm').read().strip() == 'sleep'))"}};
  // The kill is sent as the client goes; its last processes take a moment to die.
  std::string left;
  for (int i = 0; i < 50; ++i) {
    auto ps = Call("POST", "/v1/boxes/" + id + "/python", "/v1/boxes/{id}/python", count.dump());
    left = Json(ps)["stdout"];
    if (left == "0\n") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(left, "0\n") << "every process of the two calls was killed";
}

TEST_P(ApiStreamTest, ClientGoneMidPlainExecKillsIt) {
  std::string id = CreateBox();
  ASSERT_FALSE(id.empty());
  http::ClientRequest request;
  request.method = "POST";
  request.target = "/v1/boxes/" + id + "/exec";
  request.body = json({{"argv", {"sleep", "60"}}, {"timeout", 120}}).dump();
  request.timeout = std::chrono::milliseconds(500);  // the client gives up and hangs up
  auto r = (tcp_ ? TcpClient() : UnixClient()).Send(request);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(BecomesIdle(id)) << "a plain exec was left running after its client went away";
}

TEST_P(ApiStreamTest, ClientGoneMidCellInterruptsIt) {
  std::string id = CreateBox();
  ASSERT_FALSE(id.empty());
  auto probe = Call("POST", "/v1/boxes/" + id + "/run_code", "/v1/boxes/{id}/run_code",
                    R"j({"code": "kept = 1"})j");
  if (probe.status == 409) GTEST_SKIP() << "no IPython in the image";
  json body = {{"code", "import time\nprint('started', flush=True)\ntime.sleep(60)"},
               {"timeout", 120}};
  DisconnectAfterFirstEvent("/v1/boxes/" + id + "/run_code", body.dump());
  EXPECT_TRUE(BecomesIdle(id)) << "the cell was left running after its client went away";
  auto next = Call("POST", "/v1/boxes/" + id + "/run_code", "/v1/boxes/{id}/run_code",
                   R"j({"code": "kept + 1", "timeout": 10})j");
  EXPECT_EQ(Json(next)["results"][0]["data"]["text/plain"], "2") << "interrupted, state kept";
}

TEST_P(ApiStreamTest, ClientGoneMidOneShotRunFreesItsBox) {
  json body = {{"code", "print('started', flush=True)\nimport time\ntime.sleep(60)"},
               {"timeout", 120}};
  auto start = Clock::now();
  DisconnectAfterFirstEvent("/v1/run", body.dump());
  bool freed = false;
  while (!freed && Clock::now() - start < std::chrono::seconds(10)) {
    freed = registry_->box_count() == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(freed) << "the one-shot box outlived its client";
}

// Processes named `comm` whose parent is `parent`.
std::set<int> ChildrenNamed(int parent, const std::string& comm) {
  std::set<int> pids;
  const std::string self = std::to_string(parent);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat("/proc/" + name + "/stat");
    std::string line;
    std::getline(stat, line);
    size_t open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state;
    std::string ppid;
    rest >> state >> ppid;
    if (ppid == self && line.substr(open + 1, close - open - 1) == comm) {
      pids.insert(std::stoi(name));
    }
  }
  return pids;
}

TEST_P(ApiStreamTest, ACrashedBoxFailsAloneOthersGoOn) {
  std::string healthy = CreateBox();
  ASSERT_FALSE(healthy.empty());
  std::set<int> before = ChildrenNamed(getpid(), "codebox-jail");
  std::string doomed = CreateBox();
  ASSERT_FALSE(doomed.empty());
  std::set<int> after = ChildrenNamed(getpid(), "codebox-jail");
  std::vector<int> fresh;
  for (int pid : after)
    if (!before.count(pid)) fresh.push_back(pid);
  ASSERT_EQ(fresh.size(), 1u) << "could not tell the new box's supervisor";
  // The box's agent (its PID 1) dies as a crash would end it.
  std::set<int> agent = ChildrenNamed(fresh[0], "codebox-agent");
  ASSERT_EQ(agent.size(), 1u) << "could not find the box's agent";
  ASSERT_EQ(kill(*agent.begin(), SIGKILL), 0);

  // The box goes down as its supervisor dies (asynchronously): within 5 s its calls fail.
  http::ClientResponse crashed;
  for (auto end = Clock::now() + std::chrono::seconds(5); Clock::now() < end;) {
    crashed = Call("POST", "/v1/boxes/" + doomed + "/exec", "/v1/boxes/{id}/exec",
                   R"j({"argv": ["true"]})j");
    if (crashed.status != 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GE(crashed.status, 500) << crashed.body;
  EXPECT_TRUE(Json(crashed).contains("error"));

  auto ok = Call("POST", "/v1/boxes/" + healthy + "/exec", "/v1/boxes/{id}/exec",
                 R"j({"argv": ["echo", "alive"]})j");
  EXPECT_EQ(Json(ok)["stdout"], "alive\n");
  EXPECT_EQ(Call("GET", "/healthz", "/healthz").status, 200);
  auto run = Call("POST", "/v1/run", "/v1/run", R"j({"code": "print(3)"})j");
  EXPECT_EQ(Json(run)["stdout"], "3\n");
  EXPECT_EQ(Call("DELETE", "/v1/boxes/" + doomed, "/v1/boxes/{id}").status, 204);

  // Memory exhaustion in a box is that box's result, not the server's problem.
  auto oom =
      Call("POST", "/v1/run", "/v1/run",
           R"j({"code": "x = []\nwhile True: x.append(bytearray(1 << 24))", "memory": 64})j");
  ASSERT_EQ(oom.status, 200) << oom.body;
  EXPECT_NE(Json(oom)["exit_code"], 0);
  EXPECT_EQ(Json(Call("POST", "/v1/boxes/" + healthy + "/exec", "/v1/boxes/{id}/exec",
                      R"j({"argv": ["echo", "still"]})j"))["stdout"],
            "still\n");
}

INSTANTIATE_TEST_SUITE_P(UnixAndTcp, ApiStreamTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "tcp" : "unix"; });

}  // namespace
}  // namespace codebox::testing
