// RemoteBox against a fake server (tests/remote/fake_server.h): every Box call as the API
// contract has it, and what the client does with answers a server must never give: wrong
// types, broken JSON, oversized bodies, names that leave their directory, hostile tars. Each
// must be a clear error, never a crash or a file outside the target.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "base/fs.h"
#include "base/io.h"
#include "codebox/box.h"
#include "http/tar.h"
#include "tests/remote/fake_server.h"

namespace codebox {
namespace {

using nlohmann::json;
using testing::FakeServer;
using testing::kBoxPath;
using testing::RemoteBoxTest;

json ExecAnswer(const std::string& out, int exit_code = 0) {
  return {{"exit_code", exit_code},
          {"signal", 0},
          {"stdout", out},
          {"stderr", ""},
          {"timed_out", false},
          {"out_of_memory", false},
          {"output_truncated", false},
          {"duration_ms", 12},
          {"driver", "jail"}};
}

TEST_F(RemoteBoxTest, CreateSendsTheBoxOptionsButNotTheLocalOnes) {
  BoxOptions options;
  options.memory_mib = 256;
  options.home = "/somewhere/only/here";
  options.server_token = "secret";
  auto box = Create(options);
  ASSERT_NE(box, nullptr);
  EXPECT_EQ(box->info().driver, "jail");
  EXPECT_EQ(box->info().limits, std::vector<std::string>{"memory 512 MiB (cgroup v2)"});
  json body = server_.LastBody("/v1/boxes");
  EXPECT_EQ(body["memory_mib"], 256);
  for (const char* local : {"server", "server_token", "home", "prestart"}) {
    EXPECT_FALSE(body.contains(local)) << local;
  }
  auto requests = server_.requests();
  ASSERT_FALSE(requests.empty());
  EXPECT_EQ(requests[0].Header("authorization"), "Bearer secret");
}

TEST_F(RemoteBoxTest, ExecAnswersAsJsonWithoutCallbacks) {
  server_.OnJson("POST", std::string(kBoxPath) + "/exec", 200, ExecAnswer("hi\n", 3));
  auto box = Create();
  ASSERT_NE(box, nullptr);
  ExecOptions options;
  options.env = {{"A", "1"}};
  options.stdin_data = "in";
  auto r = box->Exec({"sh", "-c", "echo hi; exit 3"}, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "hi\n");
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->driver, "jail");
  EXPECT_EQ(r->duration.count(), 12);
  json body = server_.LastBody(std::string(kBoxPath) + "/exec");
  EXPECT_EQ(body["argv"], json({"sh", "-c", "echo hi; exit 3"}));
  EXPECT_EQ(body["env"]["A"], "1");
  EXPECT_EQ(body["stdin_data"], "in");
}

TEST_F(RemoteBoxTest, CallbacksGetTheStreamInOrder) {
  server_.OnEvents("POST", std::string(kBoxPath) + "/python",
                   {{"stdout", R"({"text":"a"})"},
                    {"stderr", R"({"text":"e"})"},
                    {"stdout", R"({"text":"b"})"},
                    {"done", ExecAnswer("ab").dump()}});
  auto box = Create();
  ASSERT_NE(box, nullptr);
  std::string seen;
  ExecOptions options;
  options.on_stdout = [&](std::string_view t) { seen += "out:" + std::string(t) + ";"; };
  options.on_stderr = [&](std::string_view t) { seen += "err:" + std::string(t) + ";"; };
  auto r = box->RunPython("print('ab')", options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(seen, "out:a;err:e;out:b;");
  EXPECT_EQ(r->stdout_data, "ab");
  EXPECT_EQ(server_.LastBody(std::string(kBoxPath) + "/python")["code"], "print('ab')");
}

TEST_F(RemoteBoxTest, AnErrorEventIsTheCallsError) {
  server_.OnEvents("POST", std::string(kBoxPath) + "/exec",
                   {{"stdout", R"({"text":"a"})"},
                    {"error", R"({"error":{"code":"box_crashed","message":"agent gone"}})"}});
  auto box = Create();
  ASSERT_NE(box, nullptr);
  ExecOptions options;
  options.on_stdout = [](std::string_view) {};
  auto r = box->Exec({"true"}, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kBoxCrashed);
  EXPECT_NE(r.status().message().find("agent gone"), std::string::npos);
}

TEST_F(RemoteBoxTest, AStreamWithoutAResultIsAProtocolError) {
  server_.OnEvents("POST", std::string(kBoxPath) + "/exec", {{"stdout", R"({"text":"a"})"}});
  auto box = Create();
  ASSERT_NE(box, nullptr);
  ExecOptions options;
  options.on_stdout = [](std::string_view) {};
  auto r = box->Exec({"true"}, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kProtocolError);
  EXPECT_NE(r.status().message().find("without a result"), std::string::npos);
}

TEST_F(RemoteBoxTest, NoTimeoutStreamsEvenWithoutCallbacks) {
  server_.OnEvents("POST", std::string(kBoxPath) + "/exec", {{"done", ExecAnswer("x").dump()}});
  auto box = Create();
  ASSERT_NE(box, nullptr);
  ExecOptions options;
  options.timeout = kNoTimeout;
  auto r = box->Exec({"true"}, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "x");
  auto requests = server_.requests();
  EXPECT_TRUE(requests.back().WantsEventStream());
  EXPECT_EQ(server_.LastBody(std::string(kBoxPath) + "/exec")["timeout"], "none");
}

TEST_F(RemoteBoxTest, MalformedExecAnswersAreProtocolErrorsNamingTheField) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  struct Case {
    json answer;
    std::string field;
  };
  json wrong_type = ExecAnswer("x");
  wrong_type["exit_code"] = "0";
  json missing = ExecAnswer("x");
  missing.erase("stdout");
  json out_of_range = ExecAnswer("x");
  out_of_range["signal"] = 1000;
  json negative = ExecAnswer("x");
  negative["duration_ms"] = -5;
  json not_bool = ExecAnswer("x");
  not_bool["timed_out"] = 1;
  for (const Case& c : {Case{wrong_type, "exit_code"}, Case{missing, "stdout"},
                        Case{out_of_range, "signal"}, Case{negative, "duration_ms"},
                        Case{not_bool, "timed_out"}, Case{json::array({1, 2}), "object"}}) {
    server_.OnJson("POST", std::string(kBoxPath) + "/exec", 200, c.answer);
    auto r = box->Exec({"true"});
    ASSERT_FALSE(r.ok()) << c.answer.dump();
    EXPECT_EQ(r.status().code(), StatusCode::kProtocolError) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.field), std::string::npos) << r.status().ToString();
  }
  server_.On("POST", std::string(kBoxPath) + "/exec", [](const http::Request&, http::Exchange& e) {
    testing::Respond(e, 200, "{\"exit_code\": 0, \"stdout\": \"unterminated");
  });
  auto r = box->Exec({"true"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kProtocolError);
  EXPECT_NE(r.status().message().find("not valid JSON"), std::string::npos);
}

TEST_F(RemoteBoxTest, ErrorAnswersMapToTheirStatus) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  server_.On("POST", std::string(kBoxPath) + "/exec", [](const http::Request&, http::Exchange& e) {
    auto r = http::ErrorResponse(429, "resource_exhausted", "the server holds 10 boxes");
    r.headers.emplace_back("Retry-After", "1");
    (void)e.Respond(r);
  });
  auto r = box->Exec({"true"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("10 boxes"), std::string::npos);
  server_.OnJson("POST", "/v1/boxes", 400,
                 {{"error", {{"code", "invalid_argument"}, {"message", "unknown option memroy"}}}});
  auto failed = Box::Create({.server = server_.address()});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(failed.status().message().find("memroy"), std::string::npos);
}

TEST_F(RemoteBoxTest, CreateRefusesAnIdThatIsNotOne) {
  for (const char* id : {"../../v1/run", "", "b-1/exec"}) {
    server_.OnJson("POST", "/v1/boxes", 201, {{"id", id}, {"driver", "jail"}});
    auto box = Box::Create({.server = server_.address()});
    ASSERT_FALSE(box.ok()) << id;
    EXPECT_EQ(box.status().code(), StatusCode::kProtocolError);
  }
}

TEST_F(RemoteBoxTest, NothingListeningIsUnavailableNamingTheServer) {
  std::string address = "unix:" + server_.dir() + "/nobody.sock";
  auto box = Box::Create({.server = address});
  ASSERT_FALSE(box.ok());
  EXPECT_EQ(box.status().code(), StatusCode::kUnavailable) << box.status().ToString();
  EXPECT_NE(box.status().message().find("nobody.sock"), std::string::npos);
}

TEST_F(RemoteBoxTest, AMalformedServerOptionFailsValidation) {
  auto box = Box::Create({.server = "ftp://example"});
  ASSERT_FALSE(box.ok());
  EXPECT_EQ(box.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(box.status().message().find("server"), std::string::npos);
}

TEST_F(RemoteBoxTest, DestroyIsIdempotentAndEndsTheBox) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  EXPECT_TRUE(box->Destroy().ok());
  EXPECT_TRUE(box->Destroy().ok());
  auto r = box->Exec({"true"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("destroyed"), std::string::npos);
  int deletes = 0;
  for (const auto& req : server_.requests()) deletes += req.method == "DELETE";
  EXPECT_EQ(deletes, 1);
  // A box the server no longer knows is destroyed all the same.
  server_.OnJson("DELETE", kBoxPath, 404, {{"error", {{"code", "not_found"}, {"message", "no"}}}});
  auto again = Create();
  ASSERT_NE(again, nullptr);
  EXPECT_TRUE(again->Destroy().ok());
}

TEST_F(RemoteBoxTest, PastItsLifetimeTheBoxSaysSoNotNoSuchBox) {
  server_.OnJson(
      "POST", std::string(kBoxPath) + "/exec", 404,
      {{"error", {{"code", "not_found"}, {"message", "no box; it may have been reaped"}}}});
  BoxOptions options;
  options.box_timeout = std::chrono::milliseconds(200);
  auto box = Create(options);
  ASSERT_NE(box, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto r = box->Exec({"true"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_NE(r.status().message().find("lifetime"), std::string::npos);
}

TEST_F(RemoteBoxTest, RunCodeStreamsResultsAndInterruptWorksConcurrently) {
  std::atomic<bool> interrupted = false;
  server_.On("POST", std::string(kBoxPath) + "/interrupt",
             [&](const http::Request&, http::Exchange& e) {
               interrupted = true;
               testing::Respond(e, 204, "");
             });
  server_.On("POST", std::string(kBoxPath) + "/run_code",
             [&](const http::Request&, http::Exchange& e) {
               if (!e.BeginEvents(200).ok()) return;
               (void)e.SendEvent("stdout", R"({"text":"working\n"})");
               (void)e.SendEvent("result", R"({"data":{"text/plain":"1"},"is_main_result":false})");
               // Until the client interrupts over another connection (at most 10 s).
               for (int i = 0; i < 1000 && !interrupted; ++i) {
                 std::this_thread::sleep_for(std::chrono::milliseconds(10));
               }
               json done = {{"logs", {{"stdout", {"working\n"}}, {"stderr", json::array()}}},
                            {"results", {{{"data", {{"text/plain", "1"}}}}}},
                            {"error", {{"name", "KeyboardInterrupt"}, {"value", ""}}},
                            {"execution_count", 1},
                            {"driver", "jail"}};
               (void)e.SendEvent("done", done.dump());
             });
  auto box = Create();
  ASSERT_NE(box, nullptr);
  std::vector<std::string> events;
  std::atomic<bool> started = false;
  RunCodeOptions options;
  options.on_stdout = [&](std::string_view t) {
    events.push_back("out:" + std::string(t));
    started = true;
  };
  options.on_result = [&](const CellResult& r) {
    events.push_back("result:" + *r.Get("text/plain"));
  };
  std::thread interrupter([&] {
    while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_TRUE(box->InterruptCode().ok());
  });
  auto e = box->RunCode("while True: pass", options);
  interrupter.join();
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE(interrupted);
  EXPECT_EQ(events, (std::vector<std::string>{"out:working\n", "result:1"}));
  ASSERT_TRUE(e->error.has_value());
  EXPECT_EQ(e->error->name, "KeyboardInterrupt");
  EXPECT_EQ(e->execution_count, 1);
}

TEST_F(RemoteBoxTest, MalformedCellAnswersAreRefused) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  for (const json& bad :
       {json{{"results", {{{"data", {{"image/png", 5}}}}}}}, json{{"results", "no"}},
        json{{"results",
              {{{"data", {{"text/plain", "1"}}}, {"is_main_result", true}},
               {{"data", {{"text/plain", "2"}}}, {"is_main_result", true}}}}},
        json{{"error", {{"value", "no name"}}}}, json{{"execution_count", -1}}}) {
    server_.OnJson("POST", std::string(kBoxPath) + "/run_code", 200, bad);
    auto e = box->RunCode("1");
    ASSERT_FALSE(e.ok()) << bad.dump();
    EXPECT_EQ(e.status().code(), StatusCode::kProtocolError) << e.status().ToString();
  }
}

TEST_F(RemoteBoxTest, ListDirRefusesNamesThatLeaveTheDirectory) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto entry = [](const std::string& name, const std::string& path) {
    return json{{"name", name}, {"path", path}, {"type", "file"}, {"size", 1}, {"mode", 0644}};
  };
  server_.OnJson("GET", std::string(kBoxPath) + "/files", 200,
                 {{"entries", {entry("a", "/work/a"), entry("b", "/work/b")}}});
  auto ok = box->ListDir(".");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[1].path, "/work/b");
  EXPECT_EQ(server_.requests().back().query.at("list"), "1");
  for (const json& bad :
       {entry("a/b", "/work/a/b"), entry("..", "/work/.."), entry("", "/work/"),
        entry(".", "/work/."), entry("x", "/etc/passwd"),
        json{{"name", "a"}, {"path", "/work/a"}, {"type", "device"}},
        json{{"name", "a"}, {"path", "/work/a"}, {"type", "file"}, {"size", "big"}}}) {
    server_.OnJson("GET", std::string(kBoxPath) + "/files", 200,
                   {{"entries", {entry("ok", "/work/ok"), bad}}});
    auto r = box->ListDir(".");
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_TRUE(r.status().code() == StatusCode::kProtocolError ||
                r.status().code() == StatusCode::kInvalidArgument)
        << r.status().ToString();
  }
}

TEST_F(RemoteBoxTest, FilesGoAsRawBytes) {
  std::string stored;
  server_.On("PUT", std::string(kBoxPath) + "/files",
             [&](const http::Request& r, http::Exchange& e) {
               stored = r.body;
               testing::Respond(e, 204, "");
             });
  server_.On("GET", std::string(kBoxPath) + "/files", [&](const http::Request&, http::Exchange& e) {
    testing::Respond(e, 200, stored, "application/octet-stream");
  });
  auto box = Create();
  ASSERT_NE(box, nullptr);
  std::string bytes("a\0b\xff", 4);
  ASSERT_TRUE(box->WriteFile("dir/f.bin", bytes, 0600).ok());
  auto put = server_.requests().back();
  EXPECT_EQ(put.query.at("path"), "dir/f.bin");
  EXPECT_EQ(put.query.at("mode"), "0600");
  auto read = box->ReadFile("dir/f.bin");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, bytes);
}

TEST_F(RemoteBoxTest, ReadFileWithATinyLimitStillSeesErrors) {
  server_.OnJson("GET", std::string(kBoxPath) + "/files", 404,
                 {{"error", {{"code", "not_found"}, {"message", "no such file: /work/missing"}}}});
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto r = box->ReadFile("missing", 4);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
  server_.On("GET", std::string(kBoxPath) + "/files", [](const http::Request&, http::Exchange& e) {
    testing::Respond(e, 200, "12345", "application/octet-stream");
  });
  EXPECT_EQ(box->ReadFile("five", 4).status().code(), StatusCode::kLimitExceeded);
  EXPECT_EQ(*box->ReadFile("five", 5), "12345");
}

TEST_F(RemoteBoxTest, ReadFileEnforcesMaxBytesItself) {
  server_.On("GET", std::string(kBoxPath) + "/files", [](const http::Request&, http::Exchange& e) {
    testing::Respond(e, 200, std::string(2 << 20, 'x'), "application/octet-stream");
  });
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto r = box->ReadFile("big", 1 << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kLimitExceeded) << r.status().ToString();
  EXPECT_NE(r.status().message().find("max_bytes"), std::string::npos);
}

}  // namespace
}  // namespace codebox
