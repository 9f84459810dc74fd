// Processes that outlive a request, through the HTTP API against real jail boxes: start in
// the background, list, attach (events and plain JSON), stdin, signal, kill, and the server's
// bounds on what a client may ask for.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/server/server_fixture.h"

namespace codebox::testing {
namespace {

using nlohmann::json;

class ApiProcessTest : public ServerFixture {
 protected:
  // POST .../processes; the pid, or 0 after a failed check.
  int StartProcess(const std::string& id, const json& body) {
    auto r = Call("POST", "/v1/boxes/" + id + "/processes", "/v1/boxes/{id}/processes",
                  body.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? Json(r)["pid"].get<int>() : 0;
  }
  // GET .../processes: the entry of `pid`, or null.
  json Entry(const std::string& id, int pid) {
    json list = Json(Call("GET", "/v1/boxes/" + id + "/processes", "/v1/boxes/{id}/processes"));
    for (const json& p : list["processes"]) {
      if (p["pid"] == pid) return p;
    }
    return nullptr;
  }
  std::string Path(const std::string& id, int pid, const std::string& rest = "") {
    return "/v1/boxes/" + id + "/processes/" + std::to_string(pid) + rest;
  }
  // Attaches without an event stream: the process's whole result once it ends.
  json Wait(const std::string& id, int pid) {
    auto r = Call("GET", Path(id, pid, "/events"), "/v1/boxes/{id}/processes/{pid}/events");
    EXPECT_EQ(r.status, 200) << r.body;
    return Json(r);
  }
};

TEST_F(ApiProcessTest, AProcessOutlivesItsRequestAndIsFollowedLater) {
  std::string id = CreateBox();
  ASSERT_FALSE(id.empty());
  int pid = StartProcess(id, {{"argv", {"sh", "-c", "echo early; read line; echo \"got $line\""}}});
  ASSERT_GT(pid, 0);
  json entry;
  for (int i = 0; i < 100; ++i) {
    entry = Entry(id, pid);
    if (entry.is_object() && entry["stdout_bytes"] == 6) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(entry.is_object());
  EXPECT_EQ(entry["state"], "running");
  EXPECT_EQ(entry["background"], true);
  EXPECT_EQ(entry["exit_code"], nullptr);
  EXPECT_EQ(entry["argv"][0], "sh");
  // An attacher over events sees the replay, then what comes, then done.
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto w = Call("POST", Path(id, pid, "/stdin"), "/v1/boxes/{id}/processes/{pid}/stdin",
                  json({{"text", "hello\n"}, {"close", true}}).dump());
    EXPECT_EQ(w.status, 204) << w.body;
  });
  http::ClientRequest request;
  request.method = "GET";
  request.target = Path(id, pid, "/events");
  request.headers = {{"Accept", "text/event-stream"}};
  std::string text;
  json done;
  auto response = UnixClient().SendForEvents(request, [&](std::string_view name,
                                                          std::string_view data) {
    json j = json::parse(data, nullptr, false);
    if (name == "stdout") text += j["text"].get<std::string>();
    if (name == "done") done = j;
    return Status::Ok();
  });
  writer.join();
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(text, "early\ngot hello\n");
  ASSERT_TRUE(done.is_object());
  EXPECT_EQ(done["exit_code"], 0);
  EXPECT_EQ(done["pid"], pid);
  EXPECT_EQ(done["dropped_stdout"], 0);
  // Ended, it is still listed, and a late attacher gets its output and exit at once.
  EXPECT_EQ(Entry(id, pid)["state"], "exited");
  EXPECT_EQ(Entry(id, pid)["exit_code"], 0);
  json late = Wait(id, pid);
  EXPECT_EQ(late["stdout"], "early\ngot hello\n");
}

TEST_F(ApiProcessTest, SignalAndKillReachTheProcessAndItsTree) {
  std::string id = CreateBox();
  ASSERT_FALSE(id.empty());
  int termed = StartProcess(id, {{"argv", {"sleep", "600"}}});
  ASSERT_GT(termed, 0);
  auto bad = Call("POST", Path(id, termed, "/signal"), "/v1/boxes/{id}/processes/{pid}/signal",
                  R"({"signal": "SIGNOPE"})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  auto sig = Call("POST", Path(id, termed, "/signal"), "/v1/boxes/{id}/processes/{pid}/signal",
                  R"({"signal": "SIGTERM"})");
  EXPECT_EQ(sig.status, 204) << sig.body;
  EXPECT_EQ(Wait(id, termed)["signal"], 15);

  // The tree: a child that left the process group goes too.
  int tree = StartProcess(id, {{"argv", {"sh", "-c", "setsid sleep 600 & sleep 600"}}});
  ASSERT_GT(tree, 0);
  auto killed = Call("DELETE", Path(id, tree), "/v1/boxes/{id}/processes/{pid}");
  EXPECT_EQ(killed.status, 204) << killed.body;
  EXPECT_EQ(Wait(id, tree)["signal"], 9);
  json count = {{"code",
                 "import os\n"
                 "print(sum(1 for p in os.listdir('/proc') if p.isdigit() and "
                 "open('/proc/' + p + '/comm').read().strip() == 'sleep'))"}};
  std::string left;
  for (int i = 0; i < 50 && left != "0\n"; ++i) {
    left = Json(Call("POST", "/v1/boxes/" + id + "/python", "/v1/boxes/{id}/python",
                     count.dump()))["stdout"];
    if (left != "0\n") std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(left, "0\n");
  // Gone: 404 for each route that needs a running process, and for a pid never seen.
  auto again = Call("DELETE", Path(id, tree), "/v1/boxes/{id}/processes/{pid}");
  EXPECT_EQ(again.status, 404) << again.body;
  auto unknown = Call("GET", Path(id, 4000000, "/events"), "/v1/boxes/{id}/processes/{pid}/events");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
}

TEST_F(ApiProcessTest, TheServerBoundsWhatAClientAsks) {
  std::string id = CreateBox();
  ASSERT_FALSE(id.empty());
  const std::string route = "/v1/boxes/{id}/processes";
  const std::string target = "/v1/boxes/" + id + "/processes";
  auto over = Call("POST", target, route,
                   json({{"argv", {"true"}}, {"ring_bytes", 1ull << 40}}).dump());
  EXPECT_EQ(over.status, 400);
  EXPECT_NE(over.body.find("--max-output-limit"), std::string::npos) << over.body;
  auto foreground = Call("POST", target, route, json({{"argv", {"true"}}, {"background", false}}).dump());
  EXPECT_EQ(foreground.status, 400);
  EXPECT_NE(foreground.body.find("/exec"), std::string::npos) << foreground.body;
  auto no_argv = Call("POST", target, route, "{}");
  EXPECT_EQ(no_argv.status, 400);
  auto unknown = Call("POST", target, route, json({{"argv", {"true"}}, {"ring", 5}}).dump());
  EXPECT_EQ(unknown.status, 400);
  // Not a pid: no such route.
  http::ClientRequest not_pid;
  not_pid.method = "DELETE";
  not_pid.target = target + "/0012";
  auto answered = UnixClient().Send(not_pid);
  ASSERT_TRUE(answered.ok());
  EXPECT_EQ(answered->status, 404) << answered->body;
  // A small ring keeps the last bytes and says how many fell out.
  int pid = StartProcess(id, {{"argv", {"sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x"}},
                              {"ring_bytes", 1000}});
  ASSERT_GT(pid, 0);
  // Once it ended: an attacher that comes earlier gets the ring and then the rest live.
  for (int i = 0; i < 200 && Entry(id, pid)["state"] == "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  json result = Wait(id, pid);
  EXPECT_EQ(result["stdout"].get<std::string>().size(), 1000u);
  EXPECT_EQ(result["dropped_stdout"], 99000);
}

}  // namespace
}  // namespace codebox::testing
