#include "server/node_load.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "server/box_id.h"

namespace codebox::server {
namespace {

using nlohmann::json;

std::string ReadSmallFile(const char* path) {
  std::ifstream in(path);
  if (!in) return {};
  std::string text(8192, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

// The number after `key` in `text`, or nullopt.
std::optional<double> NumberAfter(std::string_view text, std::string_view key) {
  size_t at = text.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(at + key.size());
  size_t start = rest.find_first_not_of(' ');
  if (start == std::string_view::npos) return std::nullopt;
  rest = rest.substr(start);
  double value = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
  if (ec != std::errc() || !std::isfinite(value) || value < 0) return std::nullopt;
  return value;
}

}  // namespace

bool NodeLoad::busy() const {
  return cpu_pressure >= kBusyCpuPressure || memory_pressure >= kBusyMemoryPressure ||
         (memory_available_bytes > 0 && memory_available_bytes < kBusyMemoryAvailable);
}

double NodeLoad::score() const {
  double used = max_boxes == 0 ? 1.0 : static_cast<double>(boxes) / max_boxes;
  return used + (cpu_pressure + memory_pressure) / 100.0 - 0.01 * std::min(pool_ready, 10u);
}

bool NodeLoad::Offers(DriverKind driver) const {
  if (driver == DriverKind::kAuto) return !drivers.empty();
  return std::find(drivers.begin(), drivers.end(), DriverKindName(driver)) != drivers.end();
}

double ParsePressure(std::string_view text) {
  size_t line_end = text.find('\n');
  std::string_view some = text.substr(0, line_end);
  if (some.substr(0, 5) != "some ") return 0;
  return std::min(NumberAfter(some, "avg10=").value_or(0), 100.0);
}

uint64_t ParseMemAvailable(std::string_view text) {
  auto kib = NumberAfter(text, "MemAvailable:");
  if (!kib || *kib > 1e15) return 0;
  return static_cast<uint64_t>(*kib) * 1024;
}

NodeLoad MeasureLoad(const BoxRegistry& registry, const std::vector<std::string>& drivers) {
  NodeLoad load;
  load.node = registry.node();
  load.incarnation = registry.incarnation();
  load.boxes = registry.box_count();
  load.max_boxes = registry.max_boxes();
  for (const PoolStatus& pool : registry.Pools()) load.pool_ready += pool.ready;
  load.cpu_pressure = ParsePressure(ReadSmallFile("/proc/pressure/cpu"));
  load.memory_pressure = ParsePressure(ReadSmallFile("/proc/pressure/memory"));
  load.memory_available_bytes = ParseMemAvailable(ReadSmallFile("/proc/meminfo"));
  load.drivers = drivers;
  return load;
}

json LoadJson(const NodeLoad& load) {
  return {{"node", load.node},
          {"incarnation", load.incarnation},
          {"boxes", load.boxes},
          {"max_boxes", load.max_boxes},
          {"pool_ready", load.pool_ready},
          {"cpu_pressure", load.cpu_pressure},
          {"memory_pressure", load.memory_pressure},
          {"memory_available_bytes", load.memory_available_bytes},
          {"drivers", load.drivers},
          {"full", load.full()},
          {"busy", load.busy()},
          {"score", load.score()}};
}

StatusOr<NodeLoad> LoadFromJson(const json& j) {
  if (!j.is_object()) return ProtocolError("a load answer is not a JSON object");
  NodeLoad load;
  auto count = [&](const char* key, uint64_t max, auto* out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_unsigned() || it->get<uint64_t>() > max) {
      return ProtocolError(std::string("a load answer's ") + key + " is not a count");
    }
    *out = static_cast<std::remove_pointer_t<decltype(out)>>(it->get<uint64_t>());
    return Status::Ok();
  };
  auto percent = [&](const char* key, double* out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number()) {
      return ProtocolError(std::string("a load answer's ") + key + " is not a number");
    }
    double v = it->get<double>();
    if (!std::isfinite(v) || v < 0 || v > 100) {
      return ProtocolError(std::string("a load answer's ") + key + " is not within 0..100");
    }
    *out = v;
    return Status::Ok();
  };
  auto node = j.find("node");
  if (node == j.end() || !node->is_string() || !IsNodeName(node->get<std::string>())) {
    return ProtocolError("a load answer names no valid node");
  }
  load.node = node->get<std::string>();
  auto incarnation = j.find("incarnation");
  if (incarnation != j.end() && incarnation->is_string() &&
      incarnation->get<std::string>().size() <= 16) {
    load.incarnation = incarnation->get<std::string>();
  }
  RETURN_IF_ERROR(count("boxes", UINT32_MAX, &load.boxes));
  RETURN_IF_ERROR(count("max_boxes", UINT32_MAX, &load.max_boxes));
  RETURN_IF_ERROR(count("pool_ready", UINT32_MAX, &load.pool_ready));
  RETURN_IF_ERROR(count("memory_available_bytes", UINT64_MAX, &load.memory_available_bytes));
  RETURN_IF_ERROR(percent("cpu_pressure", &load.cpu_pressure));
  RETURN_IF_ERROR(percent("memory_pressure", &load.memory_pressure));
  auto drivers = j.find("drivers");
  if (drivers == j.end() || !drivers->is_array() || drivers->size() > 8) {
    return ProtocolError("a load answer's drivers is not a short list");
  }
  for (const json& d : *drivers) {
    if (!d.is_string()) return ProtocolError("a load answer's driver is not a string");
    auto kind = ParseDriverKind(d.get<std::string>());
    if (kind.ok() && *kind != DriverKind::kAuto) load.drivers.push_back(d.get<std::string>());
  }
  return load;
}

}  // namespace codebox::server
