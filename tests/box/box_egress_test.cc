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

}  // namespace
}  // namespace codebox
