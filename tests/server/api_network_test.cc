// A box's network over the API: the options in POST /v1/boxes, the network and egress records
// in GET /v1/boxes/{id}, POST /v1/boxes/{id}/packages, the on_egress hook (each connection
// once; `serve` logs and counts it), and RemoteBox's EgressLog and InstallPackages over it.
// The server answering is a plain HTTP responder on the host's loopback, allowed by literal.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "codebox/box.h"
#include "testing/loopback_listener.h"
#include "tests/server/server_fixture.h"

namespace codebox::testing {
namespace {

using nlohmann::json;

// Answers every connection with one small HTTP response until destroyed.
class Responder {
 public:
  Responder() {
    auto l = ListenOnLoopback();
    if (!l.ok()) return;
    listener_ = std::move(*l);
    thread_ = std::thread([this] { Serve(); });
  }
  ~Responder() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return listener_.port; }
  // The request heads received so far, in order.
  std::vector<std::string> heads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return heads_;
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{listener_.fd.get(), POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      base::UniqueFd c(::accept4(listener_.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!c.valid()) continue;
      std::string head;
      char buf[1024];
      while (head.find("\r\n\r\n") == std::string::npos && head.size() < 65536) {
        pollfd q{c.get(), POLLIN, 0};
        if (::poll(&q, 1, 5000) <= 0) break;
        ssize_t n = ::read(c.get(), buf, sizeof buf);
        if (n <= 0) break;
        head.append(buf, static_cast<size_t>(n));
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        heads_.push_back(head);
      }
      static constexpr char kAnswer[] =
          "HTTP/1.0 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nhello\n";
      (void)base::WriteAll(c.get(), kAnswer);
    }
  }

  LoopbackListener listener_;
  mutable std::mutex mu_;
  std::vector<std::string> heads_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
};

// The box's code: fetch each URL through the proxy (NO_PROXY cleared: the host's 127.0.0.1 is
// reached through it, not the box's own), printing the body or the error.
constexpr char kFetch[] =
    "import sys, urllib.request\n"
    "for url in sys.argv[1:]:\n"
    "    try: print(urllib.request.urlopen(url, timeout=20).read().decode(), end='')\n"
    "    except Exception as e: print('failed', e)\n";

class ApiNetworkTest : public ServerFixture {
 protected:
  size_t EgressSeen(size_t at_least) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (true) {
      {
        std::lock_guard<std::mutex> lock(egress_mu_);
        if (egress_seen_.size() >= at_least || std::chrono::steady_clock::now() > deadline) {
          return egress_seen_.size();
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
};

TEST_F(ApiNetworkTest, ABoxWithoutNetworkSaysSoAndRefusesPackages) {
  const std::string id = CreateBox();
  auto got = Call("GET", "/v1/boxes/" + id, "/v1/boxes/{id}");
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(Json(got)["network"], "none");
  EXPECT_EQ(Json(got)["egress"], json::array());
  auto install = Call("POST", "/v1/boxes/" + id + "/packages", "/v1/boxes/{id}/packages",
                      R"({"packages": ["six"]})");
  EXPECT_EQ(install.status, 409) << install.body;
  EXPECT_NE(install.body.find("no network"), std::string::npos) << install.body;
  for (const char* bad :
       {R"({})", R"({"packages": "six"})", R"({"packages": [1]})",
        R"({"packages": ["six"], "index": "x"})", R"({"packages": ["six"], "timeout": 0})"}) {
    auto r = Call("POST", "/v1/boxes/" + id + "/packages", "/v1/boxes/{id}/packages", bad);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
  }
  auto bad_host = Call("POST", "/v1/boxes", "/v1/boxes", R"({"allow_hosts": ["bad host"]})");
  EXPECT_EQ(bad_host.status, 400) << bad_host.body;
  EXPECT_NE(bad_host.body.find("allow_hosts: allowlist entry 'bad host'"), std::string::npos);
}

TEST_F(ApiNetworkTest, EgressIsInTheBoxInfoAndReachesTheHookOnce) {
  Responder responder;
  ASSERT_NE(responder.port(), 0);
  const std::string allowed = "127.0.0.1:" + std::to_string(responder.port());
  const std::string id = CreateBox(json{{"allow_hosts", {allowed}}}.dump());
  json exec = {
      {"argv", {"python3", "-c", kFetch, "http://" + allowed + "/", "http://blocked.example.org/"}},
      {"env", {{"NO_PROXY", ""}, {"no_proxy", ""}}}};
  auto r = Call("POST", "/v1/boxes/" + id + "/exec", "/v1/boxes/{id}/exec", exec.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string out = Json(r)["stdout"];
  EXPECT_EQ(out.rfind("hello\nfailed", 0), 0u) << out;

  auto got = Call("GET", "/v1/boxes/" + id, "/v1/boxes/{id}");
  ASSERT_EQ(got.status, 200) << got.body;
  const json box = Json(got);
  EXPECT_EQ(box["network"], "allow: " + allowed);
  ASSERT_EQ(box["egress"].size(), 2u) << box.dump();
  // A connection is logged when it ends: the refused one may end before the fetched one.
  const bool fetched_first = box["egress"][0]["host"] == "127.0.0.1";
  const json& fetched = box["egress"][fetched_first ? 0 : 1];
  const json& refused = box["egress"][fetched_first ? 1 : 0];
  EXPECT_EQ(fetched["host"], "127.0.0.1");
  EXPECT_EQ(fetched["port"], responder.port());
  EXPECT_EQ(fetched["allowed"], true);
  EXPECT_GT(fetched["bytes_down"].get<uint64_t>(), 6u);
  EXPECT_EQ(refused["host"], "blocked.example.org");
  EXPECT_EQ(refused["allowed"], false);

  // The hook: each record once, with the box's id, however often the box is read.
  ASSERT_EQ(EgressSeen(2), 2u);
  (void)Call("GET", "/v1/boxes/" + id, "/v1/boxes/{id}");
  auto again = Call("POST", "/v1/boxes/" + id + "/exec", "/v1/boxes/{id}/exec", exec.dump());
  ASSERT_EQ(again.status, 200);
  EXPECT_EQ(EgressSeen(4), 4u);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::lock_guard<std::mutex> lock(egress_mu_);
  ASSERT_EQ(egress_seen_.size(), 4u) << "a record reached the hook twice";
  for (const auto& [box_id, record] : egress_seen_) EXPECT_EQ(box_id, id);
  // Each exec's pair: one allowed, one refused, in the order they ended.
  for (size_t i : {0, 2}) {
    EXPECT_NE(egress_seen_[i].second.allowed, egress_seen_[i + 1].second.allowed) << i;
  }
}

// Secrets are write-only over the API: the value reaches the secret's host (plain HTTP here,
// so the proxy puts it into the head), and no answer of the server holds it.
TEST_F(ApiNetworkTest, SecretsAreInjectedAndNeverAnswered) {
  Responder responder;
  ASSERT_NE(responder.port(), 0);
  const std::string host = "127.0.0.1:" + std::to_string(responder.port());
  const std::string value = "v-" + std::to_string(::getpid()) + "-not-to-be-seen";
  const json secret = {{"name", "API_KEY"}, {"value", value}, {"hosts", {host}}};
  const std::string id = CreateBox(json{{"secrets", {secret}}}.dump());
  const std::string fetch =
      "import os, urllib.request\n"
      "r = urllib.request.Request('http://" +
      host +
      "/', headers={'X-Api-Key': "
      "os.environ['API_KEY']})\n"
      "print(urllib.request.urlopen(r, timeout=20).read().decode(), os.environ['API_KEY'])\n";
  json exec = {{"argv", {"python3", "-c", fetch}}, {"env", {{"NO_PROXY", ""}, {"no_proxy", ""}}}};
  auto r = Call("POST", "/v1/boxes/" + id + "/exec", "/v1/boxes/{id}/exec", exec.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r)["stdout"], "hello\n <CODEBOX_SECRET:API_KEY>\n") << r.body;
  ASSERT_EQ(responder.heads().size(), 1u);
  EXPECT_NE(responder.heads()[0].find("X-Api-Key: " + value + "\r\n"), std::string::npos)
      << responder.heads()[0];

  auto got = Call("GET", "/v1/boxes/" + id, "/v1/boxes/{id}");
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(Json(got)["network"], "allow: only the secrets' hosts; secrets: API_KEY for " + host);
  EXPECT_EQ(Json(got)["egress"][0]["secrets"], json::array({"API_KEY"})) << got.body;
  // The audit export: the same records, one JSON object a line.
  auto lines = Call("GET", "/v1/boxes/" + id + "/egress", "/v1/boxes/{id}/egress");
  ASSERT_EQ(lines.status, 200) << lines.body;
  ASSERT_FALSE(lines.body.empty());
  EXPECT_EQ(lines.body.back(), '\n');
  EXPECT_EQ(json::parse(lines.body.substr(0, lines.body.find('\n'))), Json(got)["egress"][0]);
  auto list = Call("GET", "/v1/boxes", "/v1/boxes");
  auto env = Call("POST", "/v1/boxes/" + id + "/exec", "/v1/boxes/{id}/exec",
                  R"({"argv": ["sh", "-c", "env; cat /proc/1/environ"]})");
  json bad_secret = secret;
  bad_secret["name"] = "1KEY";
  auto bad = Call("POST", "/v1/boxes", "/v1/boxes", json{{"secrets", {bad_secret}}}.dump());
  EXPECT_EQ(bad.status, 400) << bad.body;
  auto bad_text = Call("POST", "/v1/boxes", "/v1/boxes",
                       json{{"secrets", "API_KEY=" + value + "@" + host}}.dump());
  EXPECT_EQ(bad_text.status, 400) << bad_text.body;
  for (const auto* answer : {&r, &got, &list, &env, &bad, &bad_text}) {
    EXPECT_EQ(answer->body.find(value), std::string::npos) << answer->body;
  }

  // A box on the server made through the C++ API: the secret travels to the server and works.
  BoxOptions options;
  options.server = "unix:" + dir_ + "/codebox.sock";
  options.secrets = {{.name = "API_KEY", .value = value, .hosts = {host}}};
  auto box = Box::Create(options);
  ASSERT_TRUE(box.ok()) << box.status().ToString();
  ExecOptions direct;
  direct.env = {{"NO_PROXY", ""}, {"no_proxy", ""}};
  auto remote = (*box)->Exec({"python3", "-c", fetch}, direct);
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  EXPECT_EQ(remote->stdout_data, "hello\n <CODEBOX_SECRET:API_KEY>\n");
  ASSERT_EQ(responder.heads().size(), 2u);
  EXPECT_NE(responder.heads()[1].find("X-Api-Key: " + value + "\r\n"), std::string::npos);
}

// PUT /v1/boxes/{id}/network: a box made with the proxy channel (network allow, no hosts)
// is opened, then closed; a box without the channel, or a bad body, is refused.
TEST_F(ApiNetworkTest, SetNetworkOpensAndClosesABoxWithTheProxyChannel) {
  Responder responder;
  ASSERT_NE(responder.port(), 0);
  const std::string allowed = "127.0.0.1:" + std::to_string(responder.port());
  const std::string id = CreateBox(R"({"network": "allow"})");
  json exec = {{"argv", {"python3", "-c", kFetch, "http://" + allowed + "/"}},
               {"env", {{"NO_PROXY", ""}, {"no_proxy", ""}}}};
  auto fetch = [&] {
    auto r = Call("POST", "/v1/boxes/" + id + "/exec", "/v1/boxes/{id}/exec", exec.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return Json(r)["stdout"].get<std::string>();
  };
  EXPECT_EQ(fetch().rfind("failed", 0), 0u);
  auto open = Call("PUT", "/v1/boxes/" + id + "/network", "/v1/boxes/{id}/network",
                   json{{"allow_hosts", {allowed}}}.dump());
  ASSERT_EQ(open.status, 200) << open.body;
  EXPECT_EQ(Json(open)["network"], "allow: " + allowed);
  EXPECT_EQ(fetch(), "hello\n");
  auto close = Call("PUT", "/v1/boxes/" + id + "/network", "/v1/boxes/{id}/network",
                    R"({"network": "none"})");
  ASSERT_EQ(close.status, 200) << close.body;
  EXPECT_EQ(fetch().rfind("failed", 0), 0u);
  for (const char* bad : {R"({"network": "wide"})", R"({"allow_hosts": ["bad host"]})",
                          R"({"network": "open", "allow_hosts": ["a.org"]})", R"({"x": 1})",
                          R"({"allow_hosts": "a.org"})"}) {
    auto r = Call("PUT", "/v1/boxes/" + id + "/network", "/v1/boxes/{id}/network", bad);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
  }
  const std::string plain = CreateBox();
  auto refused = Call("PUT", "/v1/boxes/" + plain + "/network", "/v1/boxes/{id}/network",
                      json{{"allow_hosts", {allowed}}}.dump());
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_NE(refused.body.find("no proxy channel"), std::string::npos) << refused.body;

  // The C++ API on a server's box: the same, through RemoteBox.
  BoxOptions options;
  options.server = "unix:" + dir_ + "/codebox.sock";
  options.network = NetworkMode::kAllow;
  auto box = Box::Create(options);
  ASSERT_TRUE(box.ok()) << box.status().ToString();
  ASSERT_TRUE((*box)->SetNetwork(NetworkMode::kAllow, {allowed}).ok());
  EXPECT_EQ((*box)->info().network, "allow: " + allowed);
  ExecOptions direct;
  direct.env = {{"NO_PROXY", ""}, {"no_proxy", ""}};
  auto r = (*box)->Exec({"python3", "-c", kFetch, "http://" + allowed + "/"}, direct);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "hello\n");
}

TEST_F(ApiNetworkTest, RemoteBoxReadsTheLogAndInstallsOverTheApi) {
  Responder responder;
  ASSERT_NE(responder.port(), 0);
  const std::string allowed = "127.0.0.1:" + std::to_string(responder.port());
  BoxOptions options;
  options.server = "unix:" + dir_ + "/codebox.sock";
  options.allow_hosts = {allowed};
  auto box = Box::Create(options);
  ASSERT_TRUE(box.ok()) << box.status().ToString();
  EXPECT_EQ((*box)->info().network, "allow: " + allowed);
  ExecOptions direct;
  direct.env = {{"NO_PROXY", ""}, {"no_proxy", ""}};
  auto r = (*box)->Exec({"python3", "-c", kFetch, "http://" + allowed + "/"}, direct);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "hello\n");
  std::vector<EgressRecord> log = (*box)->EgressLog();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].host, "127.0.0.1");
  EXPECT_TRUE(log[0].allowed);

  // An index no one serves: pip fails, and says so, as a result (not an error).
  InstallOptions install;
  install.index_url = "http://127.0.0.1:" + std::to_string(responder.port()) + "/simple";
  install.timeout = std::chrono::seconds(120);
  auto pip = (*box)->InstallPackages({"surely-not-a-package-codebox"}, install);
  ASSERT_TRUE(pip.ok()) << pip.status().ToString();
  EXPECT_NE(pip->exit_code, 0);

  BoxOptions none;
  none.server = options.server;
  auto plain = Box::Create(none);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ((*plain)->info().network, "none");
  auto refused = (*plain)->InstallPackages({"six"});
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition)
      << refused.status().ToString();
  EXPECT_TRUE((*plain)->EgressLog().empty());
}

}  // namespace
}  // namespace codebox::testing
