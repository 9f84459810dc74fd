// GET /metrics: the server's counters and histograms in the Prometheus text exposition format
// (version 0.0.4). A tiny registry of our own: Debian bookworm packages no maintained C++
// Prometheus client (prometheus-cpp is not in it), and what we need is a few families of
// counters and fixed-bucket histograms behind one mutex.
//
//   metrics.ObserveRequest("POST", "/v1/run", 200, 0.012);
//   std::string text = metrics.Render(registry);   // also the registry's gauges
#ifndef CODEBOX_SERVER_METRICS_H_
#define CODEBOX_SERVER_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "server/box_registry.h"

namespace codebox::server {

using Labels = std::vector<std::pair<std::string, std::string>>;

// "a\"b" for a\"b: backslash, double quote and newline escaped as the format says.
std::string EscapeLabelValue(std::string_view value);

// One metric family's samples, rendered with its # HELP and # TYPE lines.
class CounterFamily {
 public:
  CounterFamily(std::string name, std::string help)
      : name_(std::move(name)), help_(std::move(help)) {}
  void Add(const Labels& labels, double value = 1);
  // Every sample, or those `keep` keeps.
  void Render(std::string* out, const std::function<bool(const Labels&)>& keep = {}) const;

 private:
  const std::string name_, help_;
  mutable std::mutex mu_;
  std::map<Labels, double> values_;
};

class HistogramFamily {
 public:
  // `bounds`: upper bounds of the buckets, ascending (+Inf is added).
  HistogramFamily(std::string name, std::string help, std::vector<double> bounds)
      : name_(std::move(name)), help_(std::move(help)), bounds_(std::move(bounds)) {}
  void Observe(const Labels& labels, double value);
  void Render(std::string* out) const;

 private:
  struct Series {
    std::vector<uint64_t> buckets;  // per bound, not cumulative; the last is +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  const std::string name_, help_;
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::map<Labels, Series> series_;
};

// Seconds, from 1 ms to 60 s.
const std::vector<double>& LatencyBuckets();

class Metrics {
 public:
  Metrics();
  // One answered HTTP request; `route` is the route's pattern ("/v1/boxes/{id}/exec"), never
  // the path itself, and a method HTTP does not define is counted as "other", so the label set
  // stays bounded whatever clients send.
  // `tenant` (server/tenants.h) also counts it in codebox_tenant_requests_total; "" does not.
  void ObserveRequest(std::string_view method, std::string_view route, int status, double seconds,
                      std::string_view tenant = {});
  // One exec-like call in a box; kind is "exec", "python", "run_code" or "run".
  void ObserveExec(std::string_view kind, double seconds);
  // An error answered, by its code name (StatusCodeName: "not_found", ...).
  void CountError(std::string_view code);
  // One connection of a box's egress proxy: allowed or refused, and the bytes it moved.
  void ObserveEgress(const EgressRecord& record);
  // Everything above, and the registry's boxes, pools and box starts, for an admin; for any
  // other caller only its own tenant's series (codebox_tenant_*), so that no tenant learns
  // what another does.
  std::string Render(const BoxRegistry& registry, const Caller& caller = Caller::System()) const;

 private:
  CounterFamily requests_;
  CounterFamily tenant_requests_;
  HistogramFamily request_duration_;
  HistogramFamily exec_duration_;
  CounterFamily errors_;
  CounterFamily egress_connections_;
  CounterFamily egress_bytes_;
};

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_METRICS_H_
