#include "remote/answers.h"

#include <cctype>
#include <limits>
#include <utility>

#include "base/json.h"
#include "base/text.h"
#include "host_files/host_files.h"

namespace codebox::remote {

using nlohmann::json;

namespace {

constexpr int64_t kMaxMillis = int64_t{1} << 50;  // ~35,000 years: a number, not a bug

std::string TypeOf(const json& j) { return j.type_name(); }

}  // namespace

StatusOr<CreatedBox> CreatedBoxFromJson(const json& j) {
  JsonFields f(j, "the server's answer to create box");
  CreatedBox box;
  ASSIGN_OR_RETURN(box.id, f.String("id"));
  // The id goes into every later request's path: only the characters the API makes
  // ("b-<16 hex>.<node>", the node up to 63 of [a-z0-9.-]), and never a ".." segment.
  bool ok = box.id.starts_with("b-") && box.id.size() <= 82 &&
            box.id.find("..") == std::string::npos;
  for (char c : box.id) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.');
  }
  if (!ok) return f.Error("id", "is not a box id: " + base::TerminalSafe(box.id, 80));
  ASSIGN_OR_RETURN(box.info.driver, f.String("driver"));
  box.info.driver = base::TerminalSafe(box.info.driver, 64);
  ASSIGN_OR_RETURN(box.info.limits, f.Strings("limits", false));
  ASSIGN_OR_RETURN(box.info.limits_not_enforced, f.Strings("limits_not_enforced", false));
  ASSIGN_OR_RETURN(std::string network, f.String("network", false));
  if (!network.empty()) box.info.network = base::TerminalSafe(network, 4096);
  ASSIGN_OR_RETURN(std::string user, f.String("user", false));
  if (!user.empty()) box.info.user = base::TerminalSafe(user, 4096);
  ASSIGN_OR_RETURN(std::string start, f.String("start", false));
  box.info.start = base::TerminalSafe(start, 128);
  ASSIGN_OR_RETURN(box.info.warnings, f.Strings("warnings", false));
  for (std::string& w : box.info.warnings) w = base::TerminalSafe(w, 4096);
  return box;
}

StatusOr<std::vector<EgressRecord>> EgressLogFromJson(const json& j) {
  JsonFields box(j, "the server's box info");
  const json* log = box.Find("egress");
  if (log == nullptr) return std::vector<EgressRecord>{};
  if (!log->is_array()) return box.Error("egress", "is not an array");
  constexpr size_t kMaxRecords = 1000;  // a box keeps no more (Box::EgressLog)
  const size_t skip = log->size() > kMaxRecords ? log->size() - kMaxRecords : 0;
  std::vector<EgressRecord> out;
  for (size_t i = skip; i < log->size(); ++i) {
    if (!(*log)[i].is_object()) return box.Error("egress", "holds a record that is not an object");
    JsonFields f((*log)[i], "the server's egress record");
    EgressRecord r;
    ASSIGN_OR_RETURN(std::string host, f.String("host"));
    r.host = base::TerminalSafe(host, 300);
    ASSIGN_OR_RETURN(int64_t port, f.Integer("port", 0, 65535));
    r.port = static_cast<uint16_t>(port);
    ASSIGN_OR_RETURN(r.allowed, f.Bool("allowed"));
    ASSIGN_OR_RETURN(std::string reason, f.String("reason", false));
    r.reason = base::TerminalSafe(reason, 1000);
    ASSIGN_OR_RETURN(std::string address, f.String("address", false));
    r.address = base::TerminalSafe(address, 100);
    ASSIGN_OR_RETURN(int64_t up, f.Integer("bytes_up", 0, INT64_MAX, false));
    ASSIGN_OR_RETURN(int64_t down, f.Integer("bytes_down", 0, INT64_MAX, false));
    r.bytes_up = static_cast<uint64_t>(up);
    r.bytes_down = static_cast<uint64_t>(down);
    out.push_back(std::move(r));
  }
  return out;
}

StatusOr<CellResult> CellResultFromJson(const json& j, std::string_view what) {
  if (!j.is_object()) {
    return ProtocolError(std::string(what) + " is a JSON " + TypeOf(j) + ", not an object");
  }
  JsonFields f(j, std::string(what));
  CellResult r;
  const json* data = f.Find("data");
  if (data == nullptr) return f.Error("data", "is missing");
  if (!data->is_object()) return f.Error("data", "is a " + TypeOf(*data) + ", expected an object");
  for (const auto& [mime, value] : data->items()) {
    if (!value.is_string()) {
      return f.Error("data", "holds " + base::TerminalSafe(mime, 80) + " as a " + TypeOf(value) +
                                 ", expected a string");
    }
    r.data.emplace(mime, value.get<std::string>());
  }
  ASSIGN_OR_RETURN(r.is_main_result, f.Bool("is_main_result", false));
  return r;
}

StatusOr<Execution> ExecutionFromJson(const json& j) {
  JsonFields f(j, "the server's cell result");
  Execution e;
  if (const json* logs = f.Find("logs")) {
    if (!logs->is_object())
      return f.Error("logs", "is a " + TypeOf(*logs) + ", expected an object");
    JsonFields l(*logs, f.what() + ": logs");
    ASSIGN_OR_RETURN(e.stdout_chunks, l.Strings("stdout", false));
    ASSIGN_OR_RETURN(e.stderr_chunks, l.Strings("stderr", false));
  }
  if (const json* results = f.Find("results")) {
    if (!results->is_array()) {
      return f.Error("results", "is a " + TypeOf(*results) + ", expected a list");
    }
    bool have_main = false;
    for (const json& r : *results) {
      ASSIGN_OR_RETURN(CellResult cell, CellResultFromJson(r, f.what() + ": a result"));
      if (cell.is_main_result && std::exchange(have_main, true)) {
        return f.Error("results", "holds more than one main result");
      }
      e.results.push_back(std::move(cell));
    }
  }
  if (const json* error = f.Find("error")) {
    if (!error->is_object())
      return f.Error("error", "is a " + TypeOf(*error) + ", expected an object");
    JsonFields ef(*error, f.what() + ": error");
    CellError ce;
    ASSIGN_OR_RETURN(ce.name, ef.String("name"));
    ASSIGN_OR_RETURN(ce.value, ef.String("value", false));
    ASSIGN_OR_RETURN(ce.traceback, ef.String("traceback", false));
    e.error = std::move(ce);
  }
  ASSIGN_OR_RETURN(e.execution_count,
                   f.Integer("execution_count", 0, std::numeric_limits<int64_t>::max(), false));
  ASSIGN_OR_RETURN(int64_t ms, f.Integer("duration_ms", 0, kMaxMillis, false));
  e.duration = std::chrono::milliseconds(ms);
  ASSIGN_OR_RETURN(e.timed_out, f.Bool("timed_out", false));
  ASSIGN_OR_RETURN(e.kernel_restarted, f.Bool("kernel_restarted", false));
  ASSIGN_OR_RETURN(e.out_of_memory, f.Bool("out_of_memory", false));
  ASSIGN_OR_RETURN(e.output_truncated, f.Bool("output_truncated", false));
  ASSIGN_OR_RETURN(e.driver, f.String("driver", false));
  e.driver = base::TerminalSafe(e.driver, 64);
  return e;
}

StatusOr<std::string> TextEventFromJson(std::string_view data, std::string_view event) {
  std::string what = "the server's " + std::string(event) + " event";
  ASSIGN_OR_RETURN(json j, base::ParseJsonObject(data, what));
  return JsonFields(j, what).String("text");
}

Status ErrorEventFromJson(std::string_view data) {
  auto j = base::ParseJsonObject(data, "the server's error event");
  if (!j.ok()) return j.status();
  const json* error = JsonFields(*j, "").Find("error");
  if (error == nullptr || !error->is_object()) {
    return ProtocolError("the server's error event has no {\"error\": {...}} object");
  }
  JsonFields f(*error, "the server's error event");
  ASSIGN_OR_RETURN(std::string code, f.String("code"));
  ASSIGN_OR_RETURN(std::string message, f.String("message", false));
  // The code names a StatusCode; one this client does not know is an internal error of the
  // server's, still with its message.
  StatusCode mapped = StatusCode::kInternal;
  for (int c = 1; c <= static_cast<int>(StatusCode::kLastStatusCode); ++c) {
    if (StatusCodeName(static_cast<StatusCode>(c)) == code) mapped = static_cast<StatusCode>(c);
  }
  std::string text = base::TerminalSafe(message, 4096);
  if (mapped == StatusCode::kInternal && code != "internal") {
    text = base::TerminalSafe(code, 64) + ": " + text;
  }
  return Status(mapped, "server: " + text);
}

StatusOr<std::vector<FileEntry>> EntriesFromJson(const json& j, std::string_view dir) {
  std::string what = "the server's listing of " + host_files::ShowName(dir);
  const json* list = JsonFields(j, what).Find("entries");
  if (list == nullptr || !list->is_array()) {
    return ProtocolError(what + ": no \"entries\" list");
  }
  std::vector<FileEntry> entries;
  entries.reserve(list->size());
  std::string parent;  // the directory every path must be in
  for (const json& item : *list) {
    if (!item.is_object()) {
      return ProtocolError(what + ": an entry is a JSON " + TypeOf(item) + ", not an object");
    }
    JsonFields f(item, what);
    FileEntry e;
    ASSIGN_OR_RETURN(e.name, f.String("name"));
    // The same check as a local box's listing: the name is the box's.
    RETURN_IF_ERROR(host_files::CheckNameStaysInDirectory(e.name).WithContext(what));
    ASSIGN_OR_RETURN(e.path, f.String("path"));
    bool under =
        e.path.size() > e.name.size() + 1 && e.path.front() == '/' &&
        e.path.compare(e.path.size() - e.name.size() - 1, std::string::npos, "/" + e.name) == 0;
    // "/" lists as "/name": the parent part is then empty.
    if (!under && e.path == "/" + e.name) under = true;
    if (!under) {
      return f.Error("path", host_files::ShowName(e.path) + " is not the directory + \"/\" + " +
                                 host_files::ShowName(e.name));
    }
    std::string this_parent = e.path.substr(0, e.path.size() - e.name.size() - 1);
    if (entries.empty()) parent = this_parent;
    if (this_parent != parent) {
      return f.Error("path", host_files::ShowName(e.path) + " is not in " + host_files::ShowName(parent) +
                                 " like the entries before it");
    }
    ASSIGN_OR_RETURN(e.type, f.String("type"));
    if (e.type != "file" && e.type != "dir" && e.type != "symlink" && e.type != "other") {
      return f.Error("type", "is " + host_files::ShowName(e.type) + ", not file, dir, symlink or other");
    }
    ASSIGN_OR_RETURN(int64_t size,
                     f.Integer("size", 0, std::numeric_limits<int64_t>::max(), false));
    ASSIGN_OR_RETURN(int64_t mode, f.Integer("mode", 0, 07777, false));
    e.size = static_cast<uint64_t>(size);
    e.mode = static_cast<uint32_t>(mode);
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace codebox::remote
