// A box's network from inside real jail boxes: the proxy at 127.0.0.1:3128 in the box is the
// only way out, and the host judges every connection (docs/security.md, "Network"). The
// servers listen on the host's loopback, which a box reaches only through its proxy and only
// when the allowlist names it as a literal ("127.0.0.1:PORT").

#include <chrono>
#include <string>

#include "box/egress.h"
#include "box/local_box.h"
#include "base/sha256.h"
#include "testing/rebinding_resolver.h"
#include "tests/box/egress_box_util.h"

namespace codebox {
namespace {

using namespace testing;  // NOLINT: the egress test helpers

TEST(BoxEgressTest, AnAllowedLoopbackServerIsReachedByCurlAndUrllib) {
  HttpTestServer server(Hello());
  ASSERT_TRUE(server.ok());
  CODEBOX_MAKE_BOX_OR_SKIP(box, AllowOptions({server.where()}));
  EXPECT_EQ(box->info().network, "allow: " + server.where());

  const std::string url = "http://" + server.where() + "/hello";
  EXPECT_EQ(Curl(*box, url), kHello);                   // plain HTTP, absolute URI
  EXPECT_EQ(Curl(*box, url, "--proxytunnel"), kHello);  // CONNECT
  EXPECT_EQ(Urllib(*box, url), kHello);
  EXPECT_EQ(server.requests(), 3);

  auto records = RecordsFor(*box, static_cast<uint16_t>(server.port()));
  ASSERT_EQ(records.size(), 3u);
  uint64_t up = 0;
  for (const EgressRecord& r : records) {
    EXPECT_TRUE(r.allowed) << r.reason;
    EXPECT_EQ(r.host, "127.0.0.1");
    EXPECT_EQ(r.address, "127.0.0.1");
    EXPECT_GT(r.bytes_down, sizeof kHello - 1);
    up += r.bytes_up;
  }
  EXPECT_GT(up, 0u);  // the tunnel's request (a plain request's head is not counted)
}

// Many windows' worth, both through a tunnel and as plain HTTP, arrive whole and in order.
TEST(BoxEgressTest, ALargeDownloadArrivesWhole) {
  HttpTestServer server(Hello());
  ASSERT_TRUE(server.ok());
  CODEBOX_MAKE_BOX_OR_SKIP(box, AllowOptions({server.where()}));
  const size_t size = 24u << 20;
  const std::string url = "http://" + server.where() + "/bytes/" + std::to_string(size);
  const std::string want = base::Sha256Hex(Pattern(size));
  for (const char* flags : {"", "--proxytunnel"}) {
    auto r = box->Exec(
        {"sh", "-c", std::string("curl -sS --max-time 60 ") + flags + " '" + url + "' | sha256sum"},
        ThroughProxy());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->stdout_data.substr(0, 64), want) << flags << r->stderr_data;
  }
}

TEST(BoxEgressTest, AHostOffTheListIsRefusedWithTheProxysReason) {
  HttpTestServer allowed(Hello()), other(Hello());
  ASSERT_TRUE(allowed.ok() && other.ok());
  CODEBOX_MAKE_BOX_OR_SKIP(box, AllowOptions({allowed.where()}));
  const std::string url = "http://" + other.where() + "/hello";

  std::string plain = Curl(*box, url, "-i");
  EXPECT_NE(plain.find("403 Forbidden"), std::string::npos) << plain;
  EXPECT_NE(plain.find("allowlist"), std::string::npos) << plain;
  std::string tunnel = Curl(*box, url, "--proxytunnel");
  EXPECT_NE(tunnel.find("403"), std::string::npos) << tunnel;
  std::string urllib = Urllib(*box, url);
  EXPECT_EQ(urllib.rfind("HTTPError 403", 0), 0u) << urllib;
  EXPECT_NE(urllib.find("allowlist"), std::string::npos) << urllib;
  EXPECT_EQ(other.requests(), 0);

  auto records = RecordsFor(*box, static_cast<uint16_t>(other.port()));
  ASSERT_EQ(records.size(), 3u);
  for (const EgressRecord& r : records) {
    EXPECT_FALSE(r.allowed);
    EXPECT_EQ(r.host, "127.0.0.1");
    EXPECT_EQ(r.address, "");
    EXPECT_NE(r.reason.find("allowlist"), std::string::npos) << r.reason;
  }
}

// The host resolves names; a box's name answered with an internal address is not reached.
class RebindingEnv final : public box::BoxEnv {
 public:
  StatusOr<std::unique_ptr<box::Backend>> StartBackend(const BoxOptions& options) override {
    return box::BoxEnv::Default().StartBackend(options);
  }
  net::Resolver resolver() const override {
    return codebox::testing::RebindingResolver("allowed.test");
  }
};

TEST(BoxEgressTest, AnAllowedNameThatResolvesToTheHostsLoopbackIsRefused) {
  HttpTestServer server(Hello());
  ASSERT_TRUE(server.ok());
  const std::string port = std::to_string(server.port());
  RebindingEnv env;
  auto box = box::CreateBox(AllowOptions({"allowed.test:" + port}), env);
  // As MakeBoxOrSkipReason: only "this host cannot" skips, and never under
  // CODEBOX_TESTS_REQUIRE_BOX=1.
  const char* require = std::getenv("CODEBOX_TESTS_REQUIRE_BOX");
  if (!box.ok() && (require == nullptr || std::string(require) != "1") &&
      (box.status().code() == StatusCode::kNotFound ||
       box.status().code() == StatusCode::kUnavailable)) {
    GTEST_SKIP() << "cannot create a box here: " << box.status().message();
  }
  ASSERT_TRUE(box.ok()) << box.status().ToString();
  std::string got = Curl(**box, "http://allowed.test:" + port + "/hello", "-i");
  EXPECT_NE(got.find("403 Forbidden"), std::string::npos) << got;
  EXPECT_NE(got.find("loopback"), std::string::npos) << got;
  EXPECT_EQ(server.requests(), 0);
  auto records = RecordsFor(**box, static_cast<uint16_t>(server.port()));
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].allowed);
  EXPECT_EQ(records[0].host, "allowed.test");
  EXPECT_EQ(records[0].address, "");
}

// "open" is any public address: the host's loopback, a private or the metadata address given
// as a literal is still refused.
TEST(BoxEgressTest, AnOpenNetworkRefusesInternalAddressLiterals) {
  HttpTestServer server(Hello());
  ASSERT_TRUE(server.ok());
  BoxOptions o = TestBoxOptions();
  o.network = NetworkMode::kOpen;
  CODEBOX_MAKE_BOX_OR_SKIP(box, o);
  EXPECT_EQ(box->info().network, "open (any public address)");
  for (const std::string& where :
       {server.where(), std::string("169.254.169.254:80"), std::string("10.0.0.1:80")}) {
    std::string got = Curl(*box, "http://" + where + "/hello", "-i");
    EXPECT_NE(got.find("403 Forbidden"), std::string::npos) << where << ": " << got;
  }
  EXPECT_EQ(server.requests(), 0);
  std::vector<EgressRecord> log = box->EgressLog();
  ASSERT_EQ(log.size(), 3u);
  for (const EgressRecord& r : log) EXPECT_FALSE(r.allowed) << r.host;
}

TEST(BoxEgressTest, AnIpLiteralOffTheListIsRefused) {
  HttpTestServer server(Hello());
  ASSERT_TRUE(server.ok());
  // The name is allowed, not the address: a literal is reached only when named as one.
  CODEBOX_MAKE_BOX_OR_SKIP(box, AllowOptions({"localhost:" + std::to_string(server.port())}));
  std::string got = Curl(*box, "http://" + server.where() + "/hello", "-i");
  EXPECT_NE(got.find("403 Forbidden"), std::string::npos) << got;
  EXPECT_EQ(server.requests(), 0);
}

TEST(BoxEgressTest, NoRouteNoRawSocketsNoDnsInABoxWithANetwork) {
  HttpTestServer server(Hello());
  ASSERT_TRUE(server.ok());
  CODEBOX_MAKE_BOX_OR_SKIP(box, AllowOptions({server.where()}));
  auto r = box->RunPython(
      "import socket\n"
      "def attempt(name, f):\n"
      "    try:\n"
      "        f()\n"
      "        print(name, 'worked')\n"
      "    except OSError as e:\n"
      "        print(name, 'failed', type(e).__name__)\n"
      "attempt('direct', lambda: socket.create_connection(('1.1.1.1', 80), timeout=5))\n"
      "attempt('host-loopback', lambda: socket.create_connection(('127.0.0.1', " +
      std::to_string(server.port()) +
      "), timeout=5))\n"
      "attempt('raw', lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, "
      "socket.IPPROTO_ICMP))\n"
      "attempt('packet', lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))\n"
      "attempt('dns', lambda: socket.getaddrinfo('example.org', 80))\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data.find("worked"), std::string::npos) << r->stdout_data;
  for (const char* what :
       {"direct failed", "host-loopback failed", "raw failed", "packet failed", "dns failed"}) {
    EXPECT_NE(r->stdout_data.find(what), std::string::npos) << what << "\n" << r->stdout_data;
  }
  EXPECT_EQ(server.requests(), 0);
}

TEST(BoxEgressTest, TheByteCapCutsALargeDownload) {
  HttpTestServer server(Hello());
  ASSERT_TRUE(server.ok());
  BoxOptions o = AllowOptions({server.where()});
  o.network_max_bytes = 256 << 10;
  CODEBOX_MAKE_BOX_OR_SKIP(box, o);
  auto r = box->Exec({"sh", "-c",
                      "curl -sS --max-time 20 -o /tmp/big 'http://" + server.where() +
                          "/bytes/4194304'; echo \"exit $?\"; wc -c < /tmp/big"},
                     ThroughProxy());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data.find("exit 0"), std::string::npos) << r->stdout_data;
  size_t got =
      std::stoul(r->stdout_data.substr(r->stdout_data.rfind('\n', r->stdout_data.size() - 2) + 1));
  EXPECT_LE(got, 256u << 10);
  auto records = RecordsFor(*box, static_cast<uint16_t>(server.port()));
  ASSERT_EQ(records.size(), 1u);
  EXPECT_NE(records[0].reason.find("budget"), std::string::npos) << records[0].reason;
  EXPECT_LE(records[0].bytes_up + records[0].bytes_down, 256u << 10);
  // The budget is the box's, not a connection's: a second download gets only what is left.
  (void)Curl(*box, "http://" + server.where() + "/bytes/4194304", "-o /dev/null");
  uint64_t total = 0;
  for (const EgressRecord& rec : box->EgressLog()) total += rec.bytes_up + rec.bytes_down;
  EXPECT_EQ(box->EgressLog().size(), 2u);
  EXPECT_LE(total, 256u << 10);
}

// A connection the budget cuts is reset, not ended: through a tunnel (as TLS would be) the
// program cannot take the cut for the end of the answer.
TEST(BoxEgressTest, ACutConnectionIsResetNotEnded) {
  HttpTestServer server(Hello());
  ASSERT_TRUE(server.ok());
  BoxOptions o = AllowOptions({server.where()});
  o.network_max_bytes = 256 << 10;
  CODEBOX_MAKE_BOX_OR_SKIP(box, o);
  auto r = box->RunPython(
      "import socket\n"
      "s = socket.create_connection(('127.0.0.1', 3128), timeout=20)\n"
      "s.sendall(b'CONNECT " +
      server.where() +
      " HTTP/1.1\\r\\n\\r\\nGET /bytes/4194304 HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
      "n = 0\n"
      "try:\n"
      "    while True:\n"
      "        b = s.recv(65536)\n"
      "        if not b:\n"
      "            print('end of file after', n)\n"
      "            break\n"
      "        n += len(b)\n"
      "except ConnectionResetError:\n"
      "    print('reset after', n)\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data.rfind("reset after ", 0), 0u) << r->stdout_data << r->stderr_data;
}

TEST(BoxEgressTest, TheRateLimitSlowsADownload) {
  HttpTestServer server(Hello());
  ASSERT_TRUE(server.ok());
  BoxOptions o = AllowOptions({server.where()});
  o.network_rate_bytes = 256 << 10;
  CODEBOX_MAKE_BOX_OR_SKIP(box, o);
  const auto start = std::chrono::steady_clock::now();
  auto r = box->Exec({"curl", "-sS", "--max-time", "20", "-o", "/dev/null", "-w",
                      "%{size_download}", "http://" + server.where() + "/bytes/524288"},
                     ThroughProxy());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "524288") << r->stderr_data;
  // 512 KiB at 256 KiB/s: about two seconds (the first chunk goes at once).
  EXPECT_GT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
}

TEST(BoxEgressTest, ABoxWithoutANetworkHasNoProxy) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  EXPECT_EQ(box->info().network, "none");
  auto r = box->RunPython(
      "import os, socket\n"
      "print(sorted(k for k in os.environ if 'proxy' in k.lower()))\n"
      "try:\n"
      "    socket.create_connection(('127.0.0.1', 3128), timeout=5)\n"
      "    print('connected')\n"
      "except OSError as e:\n"
      "    print(type(e).__name__)\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "[]\nConnectionRefusedError\n");
  EXPECT_TRUE(box->EgressLog().empty());
  auto install = box->InstallPackages({"anything"});
  ASSERT_FALSE(install.ok());
  EXPECT_EQ(install.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(install.status().message().find("allow_hosts"), std::string::npos);
}

TEST(BoxEgressTest, EveryExecGetsTheProxyAndTheUsersEnvironmentWins) {
  BoxOptions o = AllowOptions({"example.org"});
  o.env = {{"NO_PROXY", "mine"}};
  CODEBOX_MAKE_BOX_OR_SKIP(box, o);
  auto r = box->Exec({"sh", "-c", "echo $HTTP_PROXY $https_proxy $no_proxy $NO_PROXY"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data,
            "http://127.0.0.1:3128 http://127.0.0.1:3128 localhost,127.0.0.1,::1 mine\n");
}

// More connections at once than the box keeps accept streams for: the rest wait in the
// backlog, and each is served as one ends.
TEST(BoxEgressTest, MoreConnectionsThanAcceptStreamsAreAllServed) {
  HttpTestServer server(Hello());
  ASSERT_TRUE(server.ok());
  CODEBOX_MAKE_BOX_OR_SKIP(box, AllowOptions({server.where()}));
  auto r = box->RunPython(
      "import concurrent.futures, urllib.request\n"
      "def get(i):\n"
      "    return urllib.request.urlopen('http://" +
          server.where() +
          "/hello', timeout=30).read()\n"
          "with concurrent.futures.ThreadPoolExecutor(40) as pool:\n"
          "    print(sum(1 for b in pool.map(get, range(40)) if b == b'" +
          "hello from the host\\n" + "'))\n",
      ThroughProxy());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "40\n") << r->stderr_data;
  EXPECT_EQ(server.requests(), 40);
  EXPECT_EQ(RecordsFor(*box, static_cast<uint16_t>(server.port())).size(), 40u);
}

// A connection to an upstream that never answers does not hold the box's teardown.
TEST(BoxEgressTest, DestroyEndsAConnectionToASilentUpstream) {
  auto silent = testing::ListenOnLoopback();  // never accepts: connected, and silent
  ASSERT_TRUE(silent.ok());
  const std::string where = "127.0.0.1:" + std::to_string(silent->port);
  CODEBOX_MAKE_BOX_OR_SKIP(box, AllowOptions({where}));
  ExecOptions e = ThroughProxy();
  e.timeout = std::chrono::seconds(2);
  auto r = box->Exec({"curl", "-sS", "--proxytunnel", "http://" + where + "/"}, e);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->timed_out);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(box->Destroy().ok());
  box.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// The log waits for the records of connections the box closed, but a box cannot make it hang:
// here the box's program ends its sending and exits while the upstream (which never accepts)
// keeps the relay waiting, and the log still answers within its bound.
TEST(BoxEgressTest, AConnectionTheBoxClosedCannotHoldTheLog) {
  auto silent = testing::ListenOnLoopback();  // never accepts: connected, and silent
  ASSERT_TRUE(silent.ok());
  const std::string where = "127.0.0.1:" + std::to_string(silent->port);
  CODEBOX_MAKE_BOX_OR_SKIP(box, AllowOptions({where}));
  ExecOptions e = ThroughProxy();
  e.timeout = std::chrono::seconds(20);
  auto r = box->RunPython(
      "import os, socket, urllib.parse\n"
      "p = urllib.parse.urlsplit(os.environ['http_proxy'])\n"
      "s = socket.create_connection((p.hostname, p.port), timeout=10)\n"
      "s.sendall(b'CONNECT " +
          where + " HTTP/1.1\\r\\nHost: " + where +
          "\\r\\n\\r\\n')\n"
          "print(s.recv(100).split(b'\\r\\n')[0].decode())\n"
          "s.shutdown(socket.SHUT_WR)\n",
      e);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->stdout_data.find(" 200"), std::string::npos) << r->stdout_data << r->stderr_data;
  for (int i = 0; i < 3; ++i) {  // every read is bounded, not only the first
    const auto start = std::chrono::steady_clock::now();
    (void)box->EgressLog();
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              box::EgressService::kCloseRecordWait + std::chrono::milliseconds(500));
  }
}

// The same channel carries a vm's connections (virtio-serial instead of a socketpair): one
// allowed fetch and one refusal (kvm where the host has it, else tcg; skipped without QEMU or
// a kernel).
TEST(BoxEgressTest, AVmBoxReachesAnAllowedServerAndNothingElse) {
  HttpTestServer server(Hello());
  ASSERT_TRUE(server.ok());
  BoxOptions o = AllowOptions({server.where()});
  o.driver = DriverKind::kVm;
  o.allow_emulation = true;
  o.exec_timeout = std::chrono::seconds(60);
  CODEBOX_MAKE_BOX_OR_SKIP(box, o);
  EXPECT_EQ(Curl(*box, "http://" + server.where() + "/hello"), kHello);
  std::string refused = Curl(*box, "http://127.0.0.1:1/hello", "-i");
  EXPECT_NE(refused.find("403 Forbidden"), std::string::npos) << refused;
  auto direct = box->RunPython(
      "import socket\n"
      "try:\n"
      "    socket.create_connection(('1.1.1.1', 80), timeout=5)\n"
      "    print('connected')\n"
      "except OSError as e:\n"
      "    print('failed')\n");
  ASSERT_TRUE(direct.ok()) << direct.status().ToString();
  EXPECT_EQ(direct->stdout_data, "failed\n");
  std::vector<EgressRecord> log = box->EgressLog();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_TRUE(log[0].allowed);
  EXPECT_FALSE(log[1].allowed);
}

}  // namespace
}  // namespace codebox
