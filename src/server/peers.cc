#include "server/peers.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <future>
#include <random>

#include "base/json.h"
#include "base/text.h"
#include "http/client.h"
#include "server/json_log.h"

namespace codebox::server {
namespace {

using Clock = std::chrono::steady_clock;

// Addresses probed at once in a refresh: a large cluster is probed in batches.
constexpr size_t kProbeBatch = 32;
// A load answer is a few hundred bytes; a peer that sends more is broken.
constexpr uint64_t kMaxLoadAnswerBytes = 64 << 10;
std::string OfNode(const PeerOptions& o) { return o.node.empty() ? "" : " of node " + o.node; }

}  // namespace

Status ParseDnsPeers(std::string_view text, std::string* name, uint16_t* port) {
  size_t colon = text.rfind(':');
  auto bad = [&] {
    return InvalidArgument("--peers-dns: '" + base::TerminalSafe(text) +
                           "' is not NAME:PORT (a DNS name, e.g. a headless Service's, and the "
                           "port every replica listens on)");
  };
  if (colon == std::string_view::npos || colon == 0 || colon + 1 >= text.size()) return bad();
  std::string_view port_text = text.substr(colon + 1);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || value == 0 ||
      value > 65535) {
    return bad();
  }
  *name = std::string(text.substr(0, colon));
  *port = static_cast<uint16_t>(value);
  return Status::Ok();
}

Peers::Peers(PeerOptions options) : options_(std::move(options)) {}

Peers::~Peers() { Stop(); }

bool Peers::enabled() const { return !options_.addresses.empty() || !options_.dns_name.empty(); }

void Peers::Start() {
  if (!enabled() || thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> refreshing(refresh_mu_);
    Refresh();
  }
  thread_ = std::thread([this] { Loop(); });
}

void Peers::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Peers::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, options_.refresh, [this] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    {
      std::lock_guard<std::mutex> refreshing(refresh_mu_);
      Refresh();
    }
    lock.lock();
  }
}

std::vector<http::Address> Peers::Resolve() const {
  std::vector<http::Address> out = options_.addresses;
  if (options_.dns_name.empty()) return out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string port = std::to_string(options_.dns_port);
  int rc = getaddrinfo(options_.dns_name.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    JsonLog::Write(base::LogLevel::kWarn, "peer lookup failed",
                   {{"name", options_.dns_name}, {"error", gai_strerror(rc)}});
    return out;
  }
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char host[NI_MAXHOST] = {};
    if (getnameinfo(a->ai_addr, a->ai_addrlen, host, sizeof(host), nullptr, 0,
                    NI_NUMERICHOST) != 0) {
      continue;
    }
    http::Address address{.kind = http::Address::Kind::kTcp, .path = {}, .host = host,
                          .port = options_.dns_port};
    bool seen = std::any_of(out.begin(), out.end(), [&](const http::Address& o) {
      return o.ToString() == address.ToString();
    });
    if (!seen) out.push_back(std::move(address));
  }
  freeaddrinfo(found);
  return out;
}

StatusOr<NodeLoad> Peers::Probe(const http::Address& address) const {
  http::ClientOptions client_options{.token = options_.token,
                                     .connect_timeout = options_.probe_timeout,
                                     .max_response_bytes = kMaxLoadAnswerBytes};
  http::ClientRequest request;
  request.target = "/v1/load";
  request.timeout = options_.probe_timeout;
  ASSIGN_OR_RETURN(http::ClientResponse response,
                   http::Client(address, client_options).Send(request));
  if (response.status != 200) return http::StatusFromErrorResponse(response);
  auto json = base::ParseJsonOrDiscarded(response.body);
  if (json.is_discarded()) return ProtocolError("GET /v1/load answered no JSON");
  return LoadFromJson(json);
}

void Peers::Refresh() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_refresh_started_ = Clock::now();
  }
  std::vector<http::Address> addresses = Resolve();
  std::vector<StatusOr<NodeLoad>> answers;
  for (size_t begin = 0; begin < addresses.size(); begin += kProbeBatch) {
    std::vector<std::future<StatusOr<NodeLoad>>> batch;
    size_t end = std::min(addresses.size(), begin + kProbeBatch);
    for (size_t i = begin; i < end; ++i) {
      batch.push_back(std::async(std::launch::async,
                                 [this, &addresses, i] { return Probe(addresses[i]); }));
    }
    for (auto& f : batch) answers.push_back(f.get());
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, Peer, std::less<>> table;
  for (size_t i = 0; i < addresses.size(); ++i) {
    if (answers[i].ok()) {
      NodeLoad& load = *answers[i];
      if (load.node == options_.node || table.count(load.node) > 0) continue;
      std::string node = load.node;
      table[node] = Peer{.node = node, .address = addresses[i], .up = true, .error = {},
                         .load = std::move(load)};
      continue;
    }
    // An address that stopped answering keeps the node it had, marked down.
    for (const auto& [node, old] : table_) {
      if (old.address.ToString() != addresses[i].ToString() || table.count(node) > 0) continue;
      Peer down = old;
      if (down.up) {
        JsonLog::Write(base::LogLevel::kWarn, "peer down",
                       {{"node", node},
                        {"address", down.address.ToString()},
                        {"error", answers[i].status().ToString()}});
      }
      down.up = false;
      down.error = answers[i].status().ToString();
      table[node] = std::move(down);
    }
  }
  for (const auto& [node, peer] : table) {
    auto old = table_.find(node);
    if (peer.up && (old == table_.end() || !old->second.up)) {
      JsonLog::Write(base::LogLevel::kInfo, "peer up",
                     {{"node", node}, {"address", peer.address.ToString()}});
    }
  }
  table_ = std::move(table);
}

StatusOr<http::Address> Peers::Locate(std::string_view node) {
  const auto asked = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = table_.find(node);
    if (it != table_.end() && it->second.up) return it->second.address;
  }
  {
    // A node is lost only after a lookup that began after this question: one refresh then
    // answers every request that waited for it (a flood of them makes one refresh at a time).
    std::lock_guard<std::mutex> refreshing(refresh_mu_);
    bool stale;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stale = last_refresh_started_ < asked;
    }
    if (stale) Refresh();
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = table_.find(node);
  if (it == table_.end()) {
    return NotFound("no replica among the peers" + OfNode(options_) + " is node " +
                    std::string(node) + " now");
  }
  if (!it->second.up) {
    return Unavailable("node " + std::string(node) + " at " + it->second.address.ToString() +
                       " does not answer: " + it->second.error);
  }
  return it->second.address;
}

void Peers::MarkDown(std::string_view node, std::string_view why) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = table_.find(node);
  if (it == table_.end()) return;
  it->second.up = false;
  it->second.error = std::string(why);
}

std::vector<PeerChoice> Peers::SampleTwo(DriverKind driver) {
  std::vector<http::Address> candidates;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [node, peer] : table_) {
      if (peer.up && Offers(peer.load, driver)) candidates.push_back(peer.address);
    }
  }
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::shuffle(candidates.begin(), candidates.end(), random);
  if (candidates.size() > 2) candidates.resize(2);
  std::vector<std::future<StatusOr<NodeLoad>>> probes;
  for (const http::Address& address : candidates) {
    probes.push_back(std::async(std::launch::async, [this, address] { return Probe(address); }));
  }
  std::vector<PeerChoice> out;
  for (size_t i = 0; i < probes.size(); ++i) {
    StatusOr<NodeLoad> load = probes[i].get();
    if (!load.ok() || load->node == options_.node) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = table_.find(load->node);
      if (it != table_.end()) it->second.load = *load;
    }
    out.push_back(PeerChoice{.address = candidates[i], .load = std::move(*load)});
  }
  return out;
}

std::vector<Peer> Peers::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Peer> out;
  for (const auto& [node, peer] : table_) out.push_back(peer);
  return out;
}

}  // namespace codebox::server
