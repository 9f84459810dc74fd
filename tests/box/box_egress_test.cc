// A box's network from inside real jail boxes: the proxy at 127.0.0.1:3128 in the box is the
// only way out, and the host judges every connection (docs/security.md, "Network"). The
// servers listen on the host's loopback, which a box reaches only through its proxy and only
// when the allowlist names it as a literal ("127.0.0.1:PORT").
#include <arpa/inet.h>

#include <chrono>
#include <map>
#include <string>

#include "box/box_internal.h"
#include "tests/box/box_test_util.h"
#include "tests/box/egress_test_server.h"

namespace codebox {
namespace {

using testing::HttpTestServer;
using testing::TestBoxOptions;

constexpr char kHello[] = "hello from the host\n";

HttpTestServer::Handler Hello() {
  return [](const std::string& path) -> std::optional<std::string> {
    if (path == "/hello") return std::string(kHello);
    if (path.rfind("/bytes/", 0) == 0) return std::string(std::stoul(path.substr(7)), 'x');
    return std::nullopt;
  };
}

BoxOptions AllowOptions(std::vector<std::string> hosts) {
  BoxOptions o = TestBoxOptions();
  o.allow_hosts = std::move(hosts);
  return o;
}

// The host's loopback servers are reached through the proxy: the box's NO_PROXY (its own
// loopback) is cleared for these execs.
ExecOptions ThroughProxy() {
  ExecOptions e;
  e.env = {{"NO_PROXY", ""}, {"no_proxy", ""}};
  return e;
}

std::string Curl(Box& box, const std::string& url, const std::string& flags = "") {
  auto r = box.Exec({"sh", "-c", "curl -sS --max-time 20 " + flags + " '" + url + "' 2>&1"},
                    ThroughProxy());
  if (!r.ok()) return "exec failed: " + r.status().ToString();
  return r->stdout_data;
}

std::string Urllib(Box& box, const std::string& url) {
  auto r = box.RunPython(
      "import sys, urllib.request, urllib.error\n"
      "try:\n"
      "    print(urllib.request.urlopen(sys.argv[1] if len(sys.argv) > 1 else '" +
          url + "', timeout=20).read().decode(), end='')\n"
      "except urllib.error.HTTPError as e:\n"
      "    print('HTTPError', e.code, e.read().decode())\n",
      ThroughProxy());
  if (!r.ok()) return "exec failed: " + r.status().ToString();
  return r->stdout_data + r->stderr_data;
}

// Which records of the box's log are about `port`.
std::vector<EgressRecord> RecordsFor(const Box& box, uint16_t port) {
  std::vector<EgressRecord> out;
  for (const EgressRecord& r : box.EgressLog()) {
    if (r.port == port) out.push_back(r);
  }
  return out;
}

TEST(BoxEgressTest, AnAllowedLoopbackServerIsReachedByCurlAndUrllib) {
  HttpTestServer server(Hello());
  ASSERT_TRUE(server.ok());
  CODEBOX_MAKE_BOX_OR_SKIP(box, AllowOptions({server.where()}));
  EXPECT_EQ(box->info().network, "allow: " + server.where());

  const std::string url = "http://" + server.where() + "/hello";
  EXPECT_EQ(Curl(*box, url), kHello);                // plain HTTP, absolute URI
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
    return [](const std::string& host, uint16_t) -> StatusOr<std::vector<sockaddr_storage>> {
      if (host != "allowed.test") return NotFound(host + ": not a name of this test");
      std::vector<sockaddr_storage> out(2);
      auto* a = reinterpret_cast<sockaddr_in*>(&out[0]);
      a->sin_family = AF_INET;
      inet_pton(AF_INET, "127.0.0.1", &a->sin_addr);
      auto* b = reinterpret_cast<sockaddr_in*>(&out[1]);
      b->sin_family = AF_INET;
      inet_pton(AF_INET, "10.1.2.3", &b->sin_addr);
      return out;
    };
  }
};

TEST(BoxEgressTest, AnAllowedNameThatResolvesToTheHostsLoopbackIsRefused) {
  HttpTestServer server(Hello());
  ASSERT_TRUE(server.ok());
  const std::string port = std::to_string(server.port());
  RebindingEnv env;
  auto box = box::CreateBox(AllowOptions({"allowed.test:" + port}), env);
  if (!box.ok() && box.status().code() == StatusCode::kNotFound &&
      std::getenv("CODEBOX_TESTS_REQUIRE_BOX") == nullptr) {
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
      std::to_string(server.port()) + "), timeout=5))\n"
      "attempt('raw', lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))\n"
      "attempt('packet', lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))\n"
      "attempt('dns', lambda: socket.getaddrinfo('example.org', 80))\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data.find("worked"), std::string::npos) << r->stdout_data;
  for (const char* what : {"direct failed", "host-loopback failed", "raw failed", "packet failed",
                           "dns failed"}) {
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
  size_t got = std::stoul(r->stdout_data.substr(r->stdout_data.rfind('\n', r->stdout_data.size() - 2) + 1));
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
      "    return urllib.request.urlopen('http://" + server.where() +
          "/hello', timeout=30).read()\n"
      "with concurrent.futures.ThreadPoolExecutor(40) as pool:\n"
      "    print(sum(1 for b in pool.map(get, range(40)) if b == b'" + "hello from the host\\n" +
          "'))\n",
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

// A wheel made with zipfile (in a box without a network: nothing of the host's Python is
// needed) and a PEP 503 index of it on the host's loopback.
constexpr char kWheel[] = "codeboxprobe-1.0-py3-none-any.whl";
constexpr char kMakeWheel[] = R"(
import base64, hashlib, zipfile
info = 'codeboxprobe-1.0.dist-info/'
files = {
    'codeboxprobe.py': b'VALUE = 42\n',
    info + 'METADATA': b'Metadata-Version: 2.1\nName: codeboxprobe\nVersion: 1.0\n',
    info + 'WHEEL': b'Wheel-Version: 1.0\nGenerator: codebox-test\nRoot-Is-Purelib: true\n'
                    b'Tag: py3-none-any\n',
}
def digest(b):
    return 'sha256=' + base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()
record = ''.join(f'{p},{digest(b)},{len(b)}\n' for p, b in files.items()) + info + 'RECORD,,\n'
files[info + 'RECORD'] = record.encode()
with zipfile.ZipFile('/work/codeboxprobe-1.0-py3-none-any.whl', 'w') as z:
    for p, b in files.items():
        z.writestr(p, b)
)";

TEST(BoxEgressTest, InstallPackagesFromALocalIndexThenImport) {
  std::string wheel;
  {
    CODEBOX_MAKE_BOX_OR_SKIP(maker, TestBoxOptions());
    auto made = maker->RunPython(kMakeWheel);
    ASSERT_TRUE(made.ok() && made->exit_code == 0) << (made.ok() ? made->stderr_data : "");
    auto data = maker->ReadFile(std::string("/work/") + kWheel);
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    wheel = std::move(*data);
  }
  HttpTestServer index([&](const std::string& path) -> std::optional<std::string> {
    if (path == "/simple/codeboxprobe/") {
      return std::string("<html><body><a href=\"/files/") + kWheel + "\">" + kWheel +
             "</a></body></html>\n";
    }
    if (path == std::string("/files/") + kWheel) return wheel;
    return std::nullopt;
  });
  ASSERT_TRUE(index.ok());
  BoxOptions o = TestBoxOptions();
  o.network = NetworkMode::kAllow;  // no hosts: only the index, during the install
  CODEBOX_MAKE_BOX_OR_SKIP(box, o);
  const std::string index_url = "http://" + index.where() + "/simple";

  auto missing = box->InstallPackages({"no-such-package"}, {.index_url = index_url});
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_NE(missing->exit_code, 0);
  EXPECT_NE(missing->stderr_data.find("No matching distribution"), std::string::npos)
      << missing->stderr_data;

  auto installed = box->InstallPackages({"codeboxprobe"}, {.index_url = index_url});
  ASSERT_TRUE(installed.ok()) << installed.status().ToString();
  EXPECT_EQ(installed->exit_code, 0) << installed->stdout_data << installed->stderr_data;
  auto imported = box->Run("import codeboxprobe; print(codeboxprobe.VALUE)");
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_EQ(*imported, "42\n");
  bool fetched_wheel = false;
  for (const EgressRecord& r : RecordsFor(*box, static_cast<uint16_t>(index.port()))) {
    EXPECT_TRUE(r.allowed) << r.reason;
    fetched_wheel = fetched_wheel || r.bytes_down >= wheel.size();
  }
  EXPECT_TRUE(fetched_wheel);

  // The index was allowed for the installs only.
  const int requests = index.requests();
  std::string after = Curl(*box, index_url + "/codeboxprobe/", "-i");
  EXPECT_NE(after.find("403 Forbidden"), std::string::npos) << after;
  EXPECT_EQ(index.requests(), requests);
}

TEST(BoxEgressTest, InstallPackagesRefusesWhatPipWouldTakeAsAnOption) {
  BoxOptions o = TestBoxOptions();
  o.network = NetworkMode::kAllow;
  CODEBOX_MAKE_BOX_OR_SKIP(box, o);
  for (const std::string& bad : {std::string("-r/etc/passwd"), std::string("--index-url=x"),
                                 std::string("pkg; rm -rf /"), std::string("")}) {
    auto r = box->InstallPackages({"ok-name", bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  auto r = box->InstallPackages({"x"}, {.index_url = "ftp://127.0.0.1/simple"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("index_url"), std::string::npos);
  EXPECT_TRUE(box->EgressLog().empty());
}

}  // namespace
}  // namespace codebox
