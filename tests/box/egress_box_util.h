// Shared by the box egress tests (box_egress_test.cc, box_install_test.cc): the host's
// loopback test server's answers, options that allow it, and curl/urllib run in the box
// through its proxy.
#ifndef CODEBOX_TESTS_BOX_EGRESS_BOX_UTIL_H_
#define CODEBOX_TESTS_BOX_EGRESS_BOX_UTIL_H_

#include <optional>
#include <string>
#include <vector>

#include "codebox/box.h"
#include "testing/box_test_util.h"
#include "tests/box/egress_test_server.h"

namespace codebox::testing {

inline constexpr char kHello[] = "hello from the host\n";

// N bytes that are not all alike, so that a lost or repeated piece changes their hash.
inline std::string Pattern(size_t n) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>((i * 7 + i / 4096) % 251);
  return out;
}

inline HttpTestServer::Handler Hello() {
  return [](const std::string& path) -> std::optional<std::string> {
    if (path == "/hello") return std::string(kHello);
    if (path.rfind("/bytes/", 0) == 0) return Pattern(std::stoul(path.substr(7)));
    return std::nullopt;
  };
}

inline BoxOptions AllowOptions(std::vector<std::string> hosts) {
  BoxOptions o = TestBoxOptions();
  o.allow_hosts = std::move(hosts);
  return o;
}

// The host's loopback servers are reached through the proxy: the box's NO_PROXY (its own
// loopback) is cleared for these execs.
inline ExecOptions ThroughProxy() {
  ExecOptions e;
  e.env = {{"NO_PROXY", ""}, {"no_proxy", ""}};
  return e;
}

inline std::string Curl(Box& box, const std::string& url, const std::string& flags = "") {
  auto r = box.Exec({"sh", "-c", "curl -sS --max-time 20 " + flags + " '" + url + "' 2>&1"},
                    ThroughProxy());
  if (!r.ok()) return "exec failed: " + r.status().ToString();
  return r->stdout_data;
}

inline std::string Urllib(Box& box, const std::string& url) {
  auto r = box.RunPython(
      "import sys, urllib.request, urllib.error\n"
      "try:\n"
      "    print(urllib.request.urlopen(sys.argv[1] if len(sys.argv) > 1 else '" +
          url +
          "', timeout=20).read().decode(), end='')\n"
          "except urllib.error.HTTPError as e:\n"
          "    print('HTTPError', e.code, e.read().decode())\n",
      ThroughProxy());
  if (!r.ok()) return "exec failed: " + r.status().ToString();
  return r->stdout_data + r->stderr_data;
}

// Which records of the box's log are about `port`.
inline std::vector<EgressRecord> RecordsFor(const Box& box, uint16_t port) {
  std::vector<EgressRecord> out;
  for (const EgressRecord& r : box.EgressLog()) {
    if (r.port == port) out.push_back(r);
  }
  return out;
}

}  // namespace codebox::testing

#endif  // CODEBOX_TESTS_BOX_EGRESS_BOX_UTIL_H_
