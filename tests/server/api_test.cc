// The API over the unix socket against real jail boxes: every route and its status codes, the
// bodies it refuses, and each response checked against src/server/openapi.json.
#include "server/api.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/server/server_fixture.h"

namespace codebox::testing {
namespace {

using nlohmann::json;

// Every test runs over the unix socket and over loopback TCP.
class ApiTest : public ServerFixture, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    tcp_ = GetParam();
    ServerFixture::SetUp();
  }
};

TEST_P(ApiTest, BoxLifecycleExecPythonCells) {
  std::string id = CreateBox(R"j({"memory": 256, "env": {"GREETING": "hi"}})j");
  ASSERT_FALSE(id.empty());
  json box = Json(Call("GET", "/v1/boxes/" + id, "/v1/boxes/{id}"));
  EXPECT_EQ(box["id"], id);
  EXPECT_EQ(box["driver"], "jail");
  EXPECT_EQ(box["state"], "idle");

  json list = Json(Call("GET", "/v1/boxes", "/v1/boxes"));
  bool listed = false;
  for (const json& b : list["boxes"]) listed |= b["id"] == id;
  EXPECT_TRUE(listed) << list.dump();

  auto exec = Call("POST", "/v1/boxes/" + id + "/exec", "/v1/boxes/{id}/exec",
                   R"j({"argv": ["sh", "-c", "echo $GREETING $X; cat"], "env": {"X": "there"},
                       "stdin": "in"})j");
  ASSERT_EQ(exec.status, 200) << exec.body;
  EXPECT_EQ(Json(exec)["stdout"], "hi there\nin");
  EXPECT_EQ(Json(exec)["exit_code"], 0);

  auto failing = Call("POST", "/v1/boxes/" + id + "/exec", "/v1/boxes/{id}/exec",
                      R"j({"argv": ["sh", "-c", "exit 3"]})j");
  EXPECT_EQ(Json(failing)["exit_code"], 3) << "a non-zero exit is a result, not an error";

  auto python = Call("POST", "/v1/boxes/" + id + "/python", "/v1/boxes/{id}/python",
                     R"j({"code": "print(6 * 7)", "timeout": 10})j");
  ASSERT_EQ(python.status, 200) << python.body;
  EXPECT_EQ(Json(python)["stdout"], "42\n");

  auto cell1 = Call("POST", "/v1/boxes/" + id + "/run_code", "/v1/boxes/{id}/run_code",
                    R"j({"code": "x = 20\nx + 1"})j");
  if (cell1.status == 409) GTEST_SKIP() << "no IPython in the image: " << cell1.body;
  ASSERT_EQ(cell1.status, 200) << cell1.body;
  EXPECT_EQ(Json(cell1)["results"][0]["data"]["text/plain"], "21");
  auto cell2 = Call("POST", "/v1/boxes/" + id + "/run_code", "/v1/boxes/{id}/run_code",
                    R"j({"code": "x * 2"})j");
  EXPECT_EQ(Json(cell2)["results"][0]["data"]["text/plain"], "40") << "state kept across cells";
  auto cell3 = Call("POST", "/v1/boxes/" + id + "/run_code", "/v1/boxes/{id}/run_code",
                    R"j({"code": "1/0"})j");
  EXPECT_EQ(Json(cell3)["error"]["name"], "ZeroDivisionError");

  EXPECT_EQ(Call("POST", "/v1/boxes/" + id + "/interrupt", "/v1/boxes/{id}/interrupt").status, 204);
  EXPECT_EQ(Call("POST", "/v1/boxes/" + id + "/restart", "/v1/boxes/{id}/restart").status, 204);
  auto after = Call("POST", "/v1/boxes/" + id + "/run_code", "/v1/boxes/{id}/run_code",
                    R"j({"code": "'x' in dir()"})j");
  EXPECT_EQ(Json(after)["results"][0]["data"]["text/plain"], "False") << "restart drops state";

  EXPECT_EQ(Call("DELETE", "/v1/boxes/" + id, "/v1/boxes/{id}").status, 204);
  EXPECT_EQ(Call("GET", "/v1/boxes/" + id, "/v1/boxes/{id}").status, 404);
  EXPECT_EQ(Call("DELETE", "/v1/boxes/" + id, "/v1/boxes/{id}").status, 404);
  EXPECT_EQ(
      Call("POST", "/v1/boxes/" + id + "/exec", "/v1/boxes/{id}/exec", R"j({"argv": ["true"]})j")
          .status,
      404);
}

TEST_P(ApiTest, Files) {
  std::string id = CreateBox();
  ASSERT_FALSE(id.empty());
  const std::string files = "/v1/boxes/" + id + "/files";
  const std::string route = "/v1/boxes/{id}/files";
  std::string bytes("a\0b\xff\n", 5);
  EXPECT_EQ(
      Call("PUT", files + "?path=d/one.bin&mode=0600", route, bytes, "application/octet-stream")
          .status,
      204);
  auto got = Call("GET", files + "?path=d/one.bin", route);
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(got.body, bytes) << "files move bytes exactly";

  auto list = Call("GET", files + "?path=d&list=1", route);
  ASSERT_EQ(list.status, 200) << list.body;
  json entries = Json(list)["entries"];
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0]["name"], "one.bin");
  EXPECT_EQ(entries[0]["size"], 5);
  EXPECT_EQ(entries[0]["mode"], 0600);

  // A directory comes out as a tar; the same tar goes back in elsewhere.
  auto tar = Call("GET", files + "?path=d", route);
  ASSERT_EQ(tar.status, 200) << tar.body;
  EXPECT_EQ(tar.headers["content-type"], "application/x-tar");
  EXPECT_EQ(Call("PUT", files + "?path=/tmp/copy", route, tar.body, "application/x-tar").status,
            204);
  EXPECT_EQ(Call("GET", files + "?path=/tmp/copy/one.bin", route).body, bytes);
  EXPECT_EQ(Call("PUT", files + "?path=/tmp/bad", route, "not a tar", "application/x-tar").status,
            400);

  EXPECT_EQ(Call("DELETE", files + "?path=d", route).status, 204);
  EXPECT_EQ(Call("GET", files + "?path=d/one.bin", route).status, 404);
  EXPECT_EQ(Call("DELETE", files + "?path=d", route).status, 404);
  EXPECT_EQ(Call("GET", files, route).status, 400) << "path is required";
  EXPECT_EQ(Call("PUT", files + "?path=x&mode=rw", route, "x").status, 400);
}

TEST_P(ApiTest, RoutesAndMethods) {
  auto bad_id = Call("GET", "/v1/boxes/b-0123", "/v1/boxes/{id}");
  EXPECT_EQ(bad_id.status, 404);
  EXPECT_EQ(Json(bad_id)["error"]["code"], "not_found");
  EXPECT_EQ(Call("GET", "/v1/boxes/b-0123456789abcdef", "/v1/boxes/{id}").status, 404);
  EXPECT_EQ(Call("GET", "/v1/boxes/B-0123456789ABCDEF", "/v1/boxes/{id}").status, 404);
  auto method = Call("PATCH", "/v1/boxes", "/v1/boxes");
  EXPECT_EQ(method.status, 405);
  EXPECT_EQ(method.headers["allow"], "POST, GET");
  EXPECT_EQ(Call("GET", "/v1/run", "/v1/run").status, 405);
  http::ClientRequest nowhere;
  nowhere.target = "/v2/nothing";
  auto r = (tcp_ ? TcpClient() : UnixClient()).Send(nowhere);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404);
  // A client's path is quoted only in part; bytes of it that are not UTF-8 keep the error JSON.
  nowhere.target = "/v2/" + std::string(8'000, 'n');
  r = (tcp_ ? TcpClient() : UnixClient()).Send(nowhere);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404);
  EXPECT_LT(Json(*r)["error"]["message"].get<std::string>().size(), 400u) << "quoted in full";
  auto not_utf8 = Call("GET", "/v1/boxes/b-%FF%FE", "/v1/boxes/{id}");
  EXPECT_EQ(not_utf8.status, 404);
  EXPECT_EQ(Json(not_utf8)["error"]["code"], "not_found") << not_utf8.body;
}

TEST_P(ApiTest, RefusesMalformedBodies) {
  auto bad_json = Call("POST", "/v1/boxes", "/v1/boxes", R"j({"memory": })j");
  EXPECT_EQ(bad_json.status, 400);
  EXPECT_NE(Json(bad_json)["error"]["message"].get<std::string>().find("column 12"),
            std::string::npos)
      << bad_json.body;
  auto not_object = Call("POST", "/v1/boxes", "/v1/boxes", "[1]");
  EXPECT_EQ(not_object.status, 400);

  auto unknown = Call("POST", "/v1/boxes", "/v1/boxes", R"j({"memroy": 256})j");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_NE(unknown.body.find("memory"), std::string::npos) << "suggests the closest name";
  auto wrong_type = Call("POST", "/v1/boxes", "/v1/boxes", R"j({"memory": "lots"})j");
  EXPECT_EQ(wrong_type.status, 400);
  EXPECT_NE(wrong_type.body.find("memory"), std::string::npos) << wrong_type.body;
  for (const char* owned :
       {R"j({"home": "/"})j", R"j({"server": "unix:/x"})j", R"j({"token": "t"})j"}) {
    EXPECT_EQ(Call("POST", "/v1/boxes", "/v1/boxes", owned).status, 400) << owned;
  }
  EXPECT_EQ(Call("POST", "/v1/run", "/v1/run", R"j({"code": 1})j").status, 400);
  EXPECT_EQ(Call("POST", "/v1/run", "/v1/run", R"j({"timeout": 1})j").status, 400) << "no code";
  auto run_unknown = Call("POST", "/v1/run", "/v1/run", R"j({"cod": "print(1)"})j");
  EXPECT_EQ(run_unknown.status, 400);
  EXPECT_NE(run_unknown.body.find("'code'"), std::string::npos) << run_unknown.body;

  std::string id = CreateBox();
  ASSERT_FALSE(id.empty());
  const std::string exec = "/v1/boxes/" + id + "/exec";
  EXPECT_EQ(Call("POST", exec, "/v1/boxes/{id}/exec", R"j({"argv": []})j").status, 400);
  EXPECT_EQ(Call("POST", exec, "/v1/boxes/{id}/exec", R"j({"argv": "ls"})j").status, 400);
  EXPECT_EQ(Call("POST", exec, "/v1/boxes/{id}/exec", R"j({"argv": ["ls", 1]})j").status, 400);
  EXPECT_EQ(
      Call("POST", exec, "/v1/boxes/{id}/exec", R"j({"argv": ["ls"], "timeout": -1})j").status,
      400);
  auto argvv = Call("POST", exec, "/v1/boxes/{id}/exec", R"j({"argvv": ["ls"]})j");
  EXPECT_EQ(argvv.status, 400);
  EXPECT_NE(argvv.body.find("'argv'"), std::string::npos) << argvv.body;
  EXPECT_EQ(Call("POST", "/v1/boxes/" + id + "/run_code", "/v1/boxes/{id}/run_code",
                 R"j({"code": "1", "cwd": "/"})j")
                .status,
            400);

  // Past max_body_bytes (1 MiB here): 413 from the HTTP layer, before any handler.
  auto huge = Call("POST", exec, "/v1/boxes/{id}/exec",
                   R"j({"argv": ["true"], "stdin": ")j" + std::string(2 << 20, 'x') + "\"}");
  EXPECT_EQ(huge.status, 413);
}

TEST_P(ApiTest, ServerRoutes) {
  auto health = Call("GET", "/healthz", "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(Json(health)["status"], "ok");
  auto status = Call("GET", "/v1/status", "/v1/status");
  EXPECT_EQ(status.status, 200);
  EXPECT_EQ(Json(status)["max_boxes"], max_boxes_);
  auto metrics = Call("GET", "/metrics", "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.headers["content-type"].rfind("text/plain", 0), 0u);
  EXPECT_NE(metrics.body.find("codebox_test_metric"), std::string::npos);
  auto doc = Call("GET", "/v1/openapi.json", "/v1/openapi.json");
  EXPECT_EQ(doc.status, 200);
  EXPECT_EQ(Json(doc), json::parse(server::OpenApiDocument()));
  EXPECT_EQ(Json(doc)["openapi"], "3.1.0");
  // The hook runs after the answer is written, so the last request may be counted just after
  // the client has its answer: wait for it, within a bound.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (requests_seen_.load() < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE(requests_seen_.load(), 4) << "the on_request hook sees each request";
}

TEST_P(ApiTest, OneShotRun) {
  auto run = Call("POST", "/v1/run", "/v1/run",
                  R"j({"code": "import os; print(os.environ['A'], input())", "stdin": "x\n",
                      "env": {"A": "a"}, "memory": 128, "timeout": 10})j");
  ASSERT_EQ(run.status, 200) << run.body;
  EXPECT_EQ(Json(run)["stdout"], "a x\n");
  EXPECT_EQ(Json(run)["box"]["driver"], "jail");
  auto timed_out = Call("POST", "/v1/run", "/v1/run",
                        R"j({"code": "import time; time.sleep(30)", "timeout": 0.5})j");
  ASSERT_EQ(timed_out.status, 200) << timed_out.body;
  EXPECT_EQ(Json(timed_out)["timed_out"], true);
  EXPECT_TRUE(registry_->List().empty()) << "one-shot boxes are never registered";
}

// A lone node (no peers): its ids name it; a box of another node, or of this node's former
// life, is box_lost (404, told from not_found by its code); GET /v1/load is its load.
TEST_P(ApiTest, BoxIdsNameTheNodeAndBoxesOfOtherNodesAreLost) {
  std::string id = CreateBox();
  EXPECT_TRUE(id.ends_with(".local")) << id;
  auto get = Call("GET", "/v1/boxes/" + id, "/v1/boxes/{id}");
  EXPECT_EQ(get.status, 200);
  EXPECT_EQ(get.headers["x-codebox-node"], "local");

  auto load = Call("GET", "/v1/load", "/v1/load");
  ASSERT_EQ(load.status, 200) << load.body;
  EXPECT_EQ(Json(load)["node"], "local");
  EXPECT_EQ(Json(load)["boxes"], 1);
  EXPECT_EQ(Json(load)["incarnation"], id.substr(2, 4));
  EXPECT_EQ(Json(Call("GET", "/v1/status", "/v1/status"))["node"], "local");

  auto elsewhere = Call("GET", "/v1/boxes/b-0123456789abcdef.elsewhere", "/v1/boxes/{id}");
  EXPECT_EQ(elsewhere.status, 404);
  EXPECT_EQ(Json(elsewhere)["error"]["code"], "box_lost") << elsewhere.body;
  EXPECT_NE(elsewhere.body.find("node elsewhere"), std::string::npos) << elsewhere.body;
  EXPECT_NE(elsewhere.body.find("no peers"), std::string::npos) << elsewhere.body;

  std::string former = id;
  former[2] = former[2] == '0' ? '1' : '0';  // another incarnation of this node
  auto lost = Call("POST", "/v1/boxes/" + former + "/exec", "/v1/boxes/{id}/exec",
                   R"({"argv": ["true"]})");
  EXPECT_EQ(lost.status, 404);
  EXPECT_EQ(Json(lost)["error"]["code"], "box_lost") << lost.body;
  EXPECT_NE(lost.body.find("restarted"), std::string::npos) << lost.body;

  std::string unknown = id;
  unknown[10] = unknown[10] == '0' ? '1' : '0';  // this incarnation, never made
  auto missing = Call("GET", "/v1/boxes/" + unknown, "/v1/boxes/{id}");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(Json(missing)["error"]["code"], "not_found") << missing.body;
  EXPECT_EQ(Call("DELETE", "/v1/boxes/" + id, "/v1/boxes/{id}").status, 204);
}

INSTANTIATE_TEST_SUITE_P(UnixAndTcp, ApiTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "tcp" : "unix"; });

}  // namespace
}  // namespace codebox::testing
