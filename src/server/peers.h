// The other `codebox serve` replicas of a cluster, found without a shared database: from a
// static list (--peers) and from a DNS name whose records are every ready replica (a
// Kubernetes headless Service, --peers-dns). Each address found is asked GET /v1/load, which
// names its node; that maps the node of a box id to where to send requests for it. Refreshed
// in the background, and at once when a box names a node the table does not have.
#ifndef CODEBOX_SERVER_PEERS_H_
#define CODEBOX_SERVER_PEERS_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "codebox/status.h"
#include "http/address.h"
#include "server/node_load.h"

namespace codebox::server {

struct PeerOptions {
  std::string node;                       // this replica's own node (skipped when found)
  std::vector<http::Address> addresses;   // --peers
  std::string dns_name;                   // --peers-dns NAME:PORT
  uint16_t dns_port = 0;
  std::chrono::milliseconds refresh{5'000};
  // One GET /v1/load; placement asks peers with it too, so it is short.
  std::chrono::milliseconds probe_timeout{1'000};
  std::string token;  // sent to peers (they share the token file)
};

struct Peer {
  std::string node;
  http::Address address;
  bool up = false;
  std::string error;  // why it is down
  NodeLoad load;      // as of the last answer
};

// A peer asked just now, for placement.
struct PeerChoice {
  http::Address address;
  NodeLoad load;
};

class Peers {
 public:
  explicit Peers(PeerOptions options);
  ~Peers();  // Stop()
  Peers(const Peers&) = delete;
  Peers& operator=(const Peers&) = delete;

  // Whether any peer source was given; without, this node is alone and nothing is forwarded.
  bool enabled() const;
  // One refresh now, then one every PeerOptions::refresh on a thread of its own.
  void Start();
  void Stop();

  // Where `node`'s replica answers. A node unknown or down in the table is looked up again
  // first (a lookup that began after this call; concurrent calls share one). kNotFound: no peer is that node now; kUnavailable: it was
  // found but does not answer (the message says since when and why).
  StatusOr<http::Address> Locate(std::string_view node);
  // A forward to `node` failed to connect: it is down until a refresh finds it again.
  void MarkDown(std::string_view node, std::string_view why);

  // Up to two distinct random peers other than this node that offered `driver` when last
  // asked, each asked GET /v1/load now (in parallel, PeerOptions::probe_timeout); those that
  // did not answer are left out.
  std::vector<PeerChoice> SampleTwo(DriverKind driver);

  std::vector<Peer> List() const;
  const std::string& token() const { return options_.token; }

 private:
  void Refresh();
  void Loop();
  std::vector<http::Address> Resolve() const;
  StatusOr<NodeLoad> Probe(const http::Address& address) const;

  const PeerOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Peer, std::less<>> table_;  // by node
  std::chrono::steady_clock::time_point last_refresh_started_{};
  bool stopping_ = false;
  std::mutex refresh_mu_;  // one refresh at a time
  std::thread thread_;
};

// "NAME:PORT" of --peers-dns; errors name the flag.
Status ParseDnsPeers(std::string_view text, std::string* name, uint16_t* port);

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_PEERS_H_
