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

bool Offers(const NodeLoad& load, DriverKind driver) {
  if (driver == DriverKind::kAuto) return !load.drivers.empty();
  return std::find(load.drivers.begin(), load.drivers.end(), DriverKindName(driver)) !=
         load.drivers.end();
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

StatusOr<NodeLoad> LoadFromJson(const json& j) {
  ASSIGN_OR_RETURN(NodeLoad load, api::NodeLoadFromJson(j));
  if (!IsNodeName(load.node)) return ProtocolError("a load answer names no valid node");
  std::erase_if(load.drivers, [](const std::string& d) {
    auto kind = ParseDriverKind(d);
    return !kind.ok() || *kind == DriverKind::kAuto;
  });
  return load;
}

}  // namespace codebox::server
