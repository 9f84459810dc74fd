#include "server/metrics.h"

#include <cmath>
#include <cstdio>

namespace codebox::server {
namespace {

std::string FormatValue(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string LabelText(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out += ',';
    out += labels[i].first + "=\"" + EscapeLabelValue(labels[i].second) + '"';
  }
  return out + "}";
}

void Header(std::string* out, const std::string& name, const std::string& help, const char* type) {
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void Sample(std::string* out, const std::string& name, const Labels& labels, double value) {
  *out += name + LabelText(labels) + " " + FormatValue(value) + "\n";
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void CounterFamily::Add(const Labels& labels, double value) {
  std::lock_guard<std::mutex> lock(mu_);
  values_[labels] += value;
}

void CounterFamily::Render(std::string* out,
                           const std::function<bool(const Labels&)>& keep) const {
  Header(out, name_, help_, "counter");
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [labels, value] : values_) {
    if (!keep || keep(labels)) Sample(out, name_, labels, value);
  }
}

void HistogramFamily::Observe(const Labels& labels, double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  std::lock_guard<std::mutex> lock(mu_);
  Series& s = series_[labels];
  if (s.buckets.empty()) s.buckets.resize(bounds_.size() + 1);
  ++s.buckets[i];
  s.sum += value;
  ++s.count;
}

void HistogramFamily::Render(std::string* out) const {
  Header(out, name_, help_, "histogram");
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [labels, s] : series_) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative += s.buckets[i];
      Labels with_le = labels;
      with_le.emplace_back("le", i < bounds_.size() ? FormatValue(bounds_[i]) : "+Inf");
      Sample(out, name_ + "_bucket", with_le, static_cast<double>(cumulative));
    }
    Sample(out, name_ + "_sum", labels, s.sum);
    Sample(out, name_ + "_count", labels, static_cast<double>(s.count));
  }
}

const std::vector<double>& LatencyBuckets() {
  static const std::vector<double> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                               0.5,   1,      2.5,   5,    10,    30,   60};
  return kBuckets;
}

Metrics::Metrics()
    : requests_("codebox_requests_total", "HTTP requests answered, by method, route and status."),
      tenant_requests_("codebox_tenant_requests_total",
                       "HTTP requests answered, by tenant and status."),
      request_duration_("codebox_request_duration_seconds",
                        "Time to answer an HTTP request, by route.", LatencyBuckets()),
      exec_duration_("codebox_exec_duration_seconds",
                     "Time of one exec, python, run_code or run call in a box.", LatencyBuckets()),
      errors_("codebox_errors_total", "Errors answered, by code."),
      egress_connections_("codebox_egress_connections_total",
                          "Connections of boxes through their egress proxy, by result (allowed, "
                          "refused)."),
      egress_bytes_("codebox_egress_bytes_total",
                    "Bytes boxes moved through their egress proxy, by direction (up: box to "
                    "upstream, down: upstream to box).") {}

namespace {

// The method label: one of the methods HTTP defines, else "other". The method is whatever the
// client sent (a token of up to the header limit, even on a path that needs no token), so taken
// as is every new one would be a new series kept for the server's life.
std::string_view MethodLabel(std::string_view method) {
  static constexpr std::string_view kKnown[] = {"GET",     "POST",  "PUT",   "DELETE", "HEAD",
                                                "OPTIONS", "PATCH", "TRACE", "CONNECT"};
  for (std::string_view known : kKnown) {
    if (method == known) return known;
  }
  return "other";
}

}  // namespace

void Metrics::ObserveRequest(std::string_view method, std::string_view route, int status,
                             double seconds, std::string_view tenant) {
  if (!tenant.empty()) {
    tenant_requests_.Add({{"tenant", std::string(tenant)}, {"status", std::to_string(status)}});
  }
  requests_.Add({{"method", std::string(MethodLabel(method))},
                 {"route", std::string(route)},
                 {"status", std::to_string(status)}});
  request_duration_.Observe({{"route", std::string(route)}}, seconds);
}

void Metrics::ObserveExec(std::string_view kind, double seconds) {
  exec_duration_.Observe({{"kind", std::string(kind)}}, seconds);
}

void Metrics::CountError(std::string_view code) { errors_.Add({{"code", std::string(code)}}); }

void Metrics::ObserveEgress(const EgressRecord& r) {
  egress_connections_.Add({{"result", r.allowed ? "allowed" : "refused"}});
  egress_bytes_.Add({{"direction", "up"}}, static_cast<double>(r.bytes_up));
  egress_bytes_.Add({{"direction", "down"}}, static_cast<double>(r.bytes_down));
}

std::string Metrics::Render(const BoxRegistry& registry, const Caller& caller) const {
  std::string out;
  auto tenant_boxes = registry.TenantBoxCounts();
  auto own = [&caller](const Labels& labels) {
    for (const auto& [name, value] : labels) {
      if (name == "tenant") return caller.Sees(value);
    }
    return false;
  };
  Header(&out, "codebox_tenant_boxes", "Boxes each tenant holds.", "gauge");
  for (const auto& [tenant, n] : tenant_boxes) {
    if (caller.Sees(tenant)) Sample(&out, "codebox_tenant_boxes", {{"tenant", tenant}}, n);
  }
  tenant_requests_.Render(&out, own);
  if (!caller.admin) return out;
  Header(&out, "codebox_boxes", "Boxes the server holds, by driver and state.", "gauge");
  for (const BoxCount& c : registry.CountBoxes()) {
    Sample(&out, "codebox_boxes", {{"driver", c.driver}, {"state", c.state}}, c.count);
  }
  Header(&out, "codebox_max_boxes", "The server's limit on boxes (--max-boxes).", "gauge");
  Sample(&out, "codebox_max_boxes", {}, registry.max_boxes());
  const std::vector<PoolStatus> pools = registry.Pools();
  Header(&out, "codebox_pool_ready", "Started, prewarmed boxes waiting in each pool.", "gauge");
  for (const PoolStatus& p : pools) Sample(&out, "codebox_pool_ready", {{"pool", p.spec}}, p.ready);
  Header(&out, "codebox_pool_target", "The size each pool is kept at.", "gauge");
  for (const PoolStatus& p : pools) {
    Sample(&out, "codebox_pool_target", {{"pool", p.spec}}, p.target);
  }
  Header(&out, "codebox_pool_taken_total", "Boxes handed out by each pool.", "counter");
  for (const PoolStatus& p : pools) {
    Sample(&out, "codebox_pool_taken_total", {{"pool", p.spec}}, static_cast<double>(p.taken));
  }
  const BoxStartCounts starts = registry.start_counts();
  Header(&out, "codebox_box_starts_total", "Box starts, by result.", "counter");
  Sample(&out, "codebox_box_starts_total", {{"result", "ok"}}, static_cast<double>(starts.ok));
  Sample(&out, "codebox_box_starts_total", {{"result", "failed"}},
         static_cast<double>(starts.failed));
  requests_.Render(&out);
  request_duration_.Render(&out);
  exec_duration_.Render(&out);
  errors_.Render(&out);
  egress_connections_.Render(&out);
  egress_bytes_.Render(&out);
  return out;
}

}  // namespace codebox::server
