// Peers against fake replicas on loopback: what a peer says about itself is checked, a peer
// that lies or stops answering is never a place to send requests, and an unknown node is
// looked up again before it is called lost.
#include "server/peers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "http/server.h"
#include "server/node_load.h"

namespace codebox::server {
namespace {

// Answers GET /v1/load with whatever body the test sets.
class FakeReplica : public http::Handler {
 public:
  explicit FakeReplica(std::string body) : body_(std::move(body)) {}
  void Handle(const http::Request& request, http::Exchange& exchange) override {
    ++asked;
    http::Response response;
    if (request.path != "/v1/load") response.status = 404;
    std::lock_guard<std::mutex> lock(mu_);
    response.body = body_;
    (void)exchange.Respond(std::move(response));
  }
  void Set(std::string body) {
    std::lock_guard<std::mutex> lock(mu_);
    body_ = std::move(body);
  }
  std::atomic<int> asked{0};

 private:
  std::mutex mu_;
  std::string body_;
};

std::string LoadOf(const std::string& node, std::vector<std::string> drivers = {"jail"}) {
  NodeLoad load;
  load.node = node;
  load.incarnation = "abcd";
  load.max_boxes = 8;
  load.drivers = std::move(drivers);
  return api::NodeLoadToJson(load).dump();
}

struct Running {
  std::unique_ptr<FakeReplica> replica;
  std::unique_ptr<http::Server> server;
  http::Address address;
};

Running Start(std::string body) {
  Running r;
  r.replica = std::make_unique<FakeReplica>(std::move(body));
  http::ServerOptions options;
  options.listen = {*http::ParseAddress("127.0.0.1:0")};
  r.server = std::make_unique<http::Server>(options, r.replica.get());
  EXPECT_TRUE(r.server->Start().ok());
  r.address = r.server->bound().at(0);
  return r;
}

PeerOptions OptionsFor(const std::vector<http::Address>& addresses) {
  PeerOptions o;
  o.node = "self";
  o.addresses = addresses;
  o.refresh = std::chrono::hours(1);  // only the lookups the tests cause
  o.probe_timeout = std::chrono::milliseconds(500);
  return o;
}

TEST(PeersTest, PeersAreKnownByTheNodeTheyNameAndThisNodeIsSkipped) {
  Running a = Start(LoadOf("node-a", {"jail", "vm"}));
  Running me = Start(LoadOf("self"));
  Peers peers(OptionsFor({a.address, me.address}));
  ASSERT_TRUE(peers.enabled());
  peers.Start();
  auto found = peers.Locate("node-a");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->ToString(), a.address.ToString());
  EXPECT_EQ(peers.Locate("self").status().code(), StatusCode::kNotFound);
  ASSERT_EQ(peers.List().size(), 1u);
  EXPECT_EQ(peers.List()[0].node, "node-a");
  auto vm = peers.SampleTwo(DriverKind::kVm);
  ASSERT_EQ(vm.size(), 1u);
  EXPECT_EQ(vm[0].load.node, "node-a");
}

TEST(PeersTest, APeerThatLiesIsNoPeer) {
  Running garbage = Start("not json at all");
  Running bad_name = Start(R"({"node": "../../etc", "boxes": 0})");
  Running bad_field = Start([] {
    auto j = nlohmann::json::parse(LoadOf("node-b"));
    j["cpu_pressure"] = "very";
    return j.dump();
  }());
  Peers peers(OptionsFor({garbage.address, bad_name.address, bad_field.address}));
  peers.Start();
  EXPECT_TRUE(peers.List().empty());
  EXPECT_EQ(peers.Locate("node-b").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(peers.SampleTwo(DriverKind::kAuto).empty());
}

TEST(PeersTest, AnUnknownNodeIsLookedUpAgainBeforeItIsLost) {
  Running a = Start(LoadOf("old-name"));
  Peers peers(OptionsFor({a.address}));
  peers.Start();
  ASSERT_TRUE(peers.Locate("old-name").ok());
  a.replica->Set(LoadOf("new-name"));  // the replica at that address restarted as another node
  int asked = a.replica->asked.load();
  auto found = peers.Locate("new-name");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_GT(a.replica->asked.load(), asked) << "a fresh lookup, not the hourly refresh";
  EXPECT_EQ(peers.Locate("old-name").status().code(), StatusCode::kNotFound);
}

TEST(PeersTest, ANodeThatStopsAnsweringIsDownAndSaysWhy) {
  Running a = Start(LoadOf("node-a"));
  Peers peers(OptionsFor({a.address}));
  peers.Start();
  ASSERT_TRUE(peers.Locate("node-a").ok());
  a.server->Stop(std::chrono::milliseconds(0));
  peers.MarkDown("node-a", "connection refused");
  auto lost = peers.Locate("node-a");
  EXPECT_EQ(lost.status().code(), StatusCode::kUnavailable) << lost.status().ToString();
  EXPECT_NE(lost.status().message().find("does not answer"), std::string::npos);
  ASSERT_EQ(peers.List().size(), 1u);
  EXPECT_FALSE(peers.List()[0].up);
}

TEST(PeersTest, DnsPeersAreNameAndPort) {
  std::string name;
  uint16_t port = 0;
  ASSERT_TRUE(ParseDnsPeers("codebox-peers.ns.svc.cluster.local:8080", &name, &port).ok());
  EXPECT_EQ(name, "codebox-peers.ns.svc.cluster.local");
  EXPECT_EQ(port, 8080);
  for (const char* bad : {"", "name", ":80", "name:", "name:0", "name:65536", "name:8o"}) {
    Status st = ParseDnsPeers(bad, &name, &port);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("--peers-dns"), std::string::npos) << st.ToString();
  }
}

}  // namespace
}  // namespace codebox::server
