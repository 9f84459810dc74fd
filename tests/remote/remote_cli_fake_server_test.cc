// The CLI and the server rule (remote/server_choice.h) against a fake server: `codebox run
// --server` takes the one-shot path, `exec` goes through $CODEBOX_SERVER, `--local` never
// touches a server, and a socket where nothing answers is passed over.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "base/subprocess.h"
#include "base/unique_fd.h"
#include "remote/server_choice.h"
#include "tests/remote/fake_server.h"

namespace codebox {
namespace {

using nlohmann::json;
using testing::FakeServer;
using testing::kBoxPath;

json Done(const std::string& out, int exit_code, bool timed_out = false) {
  return {{"exit_code", exit_code}, {"signal", 0},
          {"stdout", out},          {"stderr", ""},
          {"timed_out", timed_out}, {"duration_ms", 3},
          {"driver", "jail"},       {"box", {{"driver", "jail"}, {"from_pool", true}}}};
}

std::string CodeboxBinary() {
  char self[PATH_MAX] = {};
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  std::string dir(self, static_cast<size_t>(n));
  std::string path = dir.substr(0, dir.find_last_of('/')) + "/codebox";
  return ::access(path.c_str(), X_OK) == 0 ? path : "";
}

class RemoteCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.ok());
    binary_ = CodeboxBinary();
    if (binary_.empty()) GTEST_SKIP() << "the codebox CLI is not built beside this test";
  }

  base::RunResult Codebox(std::vector<std::string> args, std::vector<std::string> env = {}) {
    base::Command command;
    command.argv = {binary_};
    command.argv.insert(command.argv.end(), args.begin(), args.end());
    command.env.insert(command.env.end(), env.begin(), env.end());
    base::RunOptions options;
    options.timeout = std::chrono::seconds(60);
    auto r = base::Run(command, options);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : base::RunResult{};
  }

  static std::string Stderr(const base::RunResult& r) {
    std::string text;
    for (const std::string& line : r.tail) text += line + "\n";
    return text;
  }

  FakeServer server_;
  std::string binary_;
};

TEST_F(RemoteCliTest, RunTakesTheOneShotPath) {
  server_.OnEvents("POST", "/v1/run",
                   {{"stdout", R"({"text":"1\n"})"}, {"done", Done("1\n", 0).dump()}});
  auto r = Codebox(
      {"run", "--server", server_.address(), "--token", "T", "--memory", "256", "print(1)"});
  EXPECT_EQ(r.exit_code, 0) << Stderr(r);
  EXPECT_EQ(r.out, "1\n");
  json body = server_.LastBody("/v1/run");
  EXPECT_EQ(body["code"], "print(1)");
  EXPECT_EQ(body["memory_mib"], 256);
  EXPECT_FALSE(body.contains("server"));
  EXPECT_FALSE(body.contains("server_token"));
  auto requests = server_.requests();
  ASSERT_EQ(requests.size(), 1u);  // no box made, none to delete
  EXPECT_EQ(requests[0].Header("authorization"), "Bearer T");
}

TEST_F(RemoteCliTest, RunPassesTheExitStatusThrough) {
  server_.OnEvents("POST", "/v1/run", {{"done", Done("", 3).dump()}});
  EXPECT_EQ(Codebox({"run", "--server", server_.address(), "raise SystemExit(3)"}).exit_code, 3);
  server_.OnEvents("POST", "/v1/run", {{"done", Done("", -1, true).dump()}});
  auto timed_out = Codebox({"run", "--server", server_.address(), "while 1: pass"});
  EXPECT_EQ(timed_out.exit_code, 124);
  EXPECT_NE(Stderr(timed_out).find("timed out"), std::string::npos);
}

TEST_F(RemoteCliTest, RunJsonPrintsTheResult) {
  server_.OnJson("POST", "/v1/run", 200, Done("42\n", 0));
  auto r = Codebox({"run", "--json", "print(42)"}, {"CODEBOX_SERVER=" + server_.address()});
  EXPECT_EQ(r.exit_code, 0) << Stderr(r);
  json j = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["result"]["stdout"], "42\n");
}

TEST_F(RemoteCliTest, ExecGoesThroughCodeboxServer) {
  server_.OnEvents("POST", std::string(kBoxPath) + "/exec",
                   {{"stdout", R"({"text":"hi\n"})"}, {"done", Done("hi\n", 0).dump()}});
  auto r = Codebox({"exec", "--", "echo", "hi"},
                   {"CODEBOX_SERVER=" + server_.address(), "CODEBOX_TOKEN=from-env"});
  EXPECT_EQ(r.exit_code, 0) << Stderr(r);
  EXPECT_EQ(r.out, "hi\n");
  std::vector<std::string> seen;
  for (const auto& req : server_.requests()) {
    seen.push_back(req.method + " " + req.path);
    EXPECT_EQ(req.Header("authorization"), "Bearer from-env");
  }
  EXPECT_EQ(seen,
            (std::vector<std::string>{"POST /v1/boxes", "POST " + std::string(kBoxPath) + "/exec",
                                      "DELETE " + std::string(kBoxPath)}));
  EXPECT_EQ(server_.LastBody(std::string(kBoxPath) + "/exec")["argv"], json({"echo", "hi"}));
}

TEST_F(RemoteCliTest, AServerErrorIsExitStatus125WithItsMessage) {
  server_.OnJson("POST", "/v1/run", 429,
                 {{"error", {{"code", "resource_exhausted"}, {"message", "the server is full"}}}});
  auto r = Codebox({"run", "--server", server_.address(), "print(1)"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(Stderr(r).find("the server is full"), std::string::npos) << Stderr(r);
}

TEST_F(RemoteCliTest, LocalNeverTouchesTheServer) {
  auto r = Codebox({"run", "--local", "--image", "no-such-image-here", "print(1)"},
                   {"CODEBOX_SERVER=" + server_.address()});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(Stderr(r).find("no-such-image-here"), std::string::npos) << Stderr(r);
  EXPECT_TRUE(server_.requests().empty());
}

TEST_F(RemoteCliTest, AMalformedCodeboxServerIsNamed) {
  auto r = Codebox({"exec", "--", "true"}, {"CODEBOX_SERVER=ftp://example"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(Stderr(r).find("CODEBOX_SERVER"), std::string::npos) << Stderr(r);
}

TEST(ServerChoiceTest, ASocketWhereNothingAnswersIsPassedOver) {
  FakeServer server;
  ASSERT_TRUE(server.ok());
  std::string path = server.dir() + "/dead.sock";
  base::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  fd = base::UniqueFd();  // bound, never listening, closed: the file stays
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(remote::ServerAnswers("unix:" + path, std::chrono::seconds(1)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  server.OnJson("GET", "/healthz", 200, {{"status", "ok"}});
  EXPECT_TRUE(remote::ServerAnswers(server.address(), std::chrono::seconds(1)));
  server.OnJson("GET", "/healthz", 503, {{"status", "draining"}});
  EXPECT_FALSE(remote::ServerAnswers(server.address(), std::chrono::seconds(1)));
}

TEST(ServerChoiceTest, TheDefaultSocketWhenItAnswers) {
  ::unsetenv("CODEBOX_SERVER");
  FakeServer server;
  ASSERT_TRUE(server.ok());
  std::string socket = server.address().substr(5);  // without "unix:"
  BoxOptions none;
  ASSERT_TRUE(remote::ChooseServer(&none, false, socket).ok());
  EXPECT_EQ(none.server, "") << "no /healthz route: nothing healthy answers";
  server.OnJson("GET", "/healthz", 200, {{"status", "ok"}});
  BoxOptions chosen;
  ASSERT_TRUE(remote::ChooseServer(&chosen, false, socket).ok());
  EXPECT_EQ(chosen.server, server.address());
  BoxOptions local;
  ASSERT_TRUE(remote::ChooseServer(&local, true, socket).ok());
  EXPECT_EQ(local.server, "");
  BoxOptions absent;
  ASSERT_TRUE(remote::ChooseServer(&absent, false, server.dir() + "/none.sock").ok());
  EXPECT_EQ(absent.server, "");
}

TEST(ServerChoiceTest, TheRuleInOrder) {
  ::setenv("CODEBOX_SERVER", "unix:/from/env.sock", 1);
  ::setenv("CODEBOX_TOKEN", "env-token", 1);
  BoxOptions given;
  given.server = "127.0.0.1:9";
  ASSERT_TRUE(remote::ChooseServer(&given, false).ok());
  EXPECT_EQ(given.server, "127.0.0.1:9");
  EXPECT_EQ(given.server_token, "env-token");
  BoxOptions from_env;
  ASSERT_TRUE(remote::ChooseServer(&from_env, false).ok());
  EXPECT_EQ(from_env.server, "unix:/from/env.sock");
  BoxOptions local;
  local.server = "127.0.0.1:9";
  ASSERT_TRUE(remote::ChooseServer(&local, true).ok());
  EXPECT_EQ(local.server, "");
  ::setenv("CODEBOX_SERVER", "not a server", 1);
  BoxOptions bad;
  Status st = remote::ChooseServer(&bad, false);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("$CODEBOX_SERVER"), std::string::npos);
  ::unsetenv("CODEBOX_SERVER");
  ::unsetenv("CODEBOX_TOKEN");
}

}  // namespace
}  // namespace codebox
