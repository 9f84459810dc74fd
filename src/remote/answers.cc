#include "remote/answers.h"

#include <cctype>
#include <limits>
#include <utility>

#include "base/json.h"
#include "base/text.h"
#include "box/host_files.h"

namespace codebox::remote {

using nlohmann::json;

namespace {

constexpr int64_t kMaxMillis = int64_t{1} << 50;  // ~35,000 years: a number, not a bug
constexpr int64_t kMaxBytes = int64_t{1} << 62;  // a byte count from the server

std::string TypeOf(const json& j) { return j.type_name(); }

}  // namespace

StatusOr<json> ParseObject(std::string_view body, std::string_view what) {
  json j = base::ParseJsonOrDiscarded(body);
  if (j.is_discarded()) {
    return ProtocolError(std::string(what) + " is not valid JSON (" + std::to_string(body.size()) +
                         " bytes: " + base::TerminalSafe(body.substr(0, 120)) + ")");
  }
  if (!j.is_object()) {
    return ProtocolError(std::string(what) + " is a JSON " + TypeOf(j) + ", not an object");
  }
  return j;
}

Status Fields::Error(std::string_view key, std::string_view problem) const {
  return ProtocolError(what_ + ": field '" + std::string(key) + "' " + std::string(problem));
}

const json* Fields::Find(const char* key) const {
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

const json* Fields::Get(const char* key, bool required, Status* missing) const {
  const json* v = Find(key);
  if (v == nullptr && required) *missing = Error(key, "is missing");
  return v;
}

StatusOr<std::string> Fields::String(const char* key, bool required) const {
  Status missing;
  const json* v = Get(key, required, &missing);
  if (!missing.ok()) return missing;
  if (v == nullptr) return std::string();
  if (!v->is_string()) return Error(key, "is a " + TypeOf(*v) + ", expected a string");
  return v->get<std::string>();
}

StatusOr<int64_t> Fields::Integer(const char* key, int64_t min, int64_t max, bool required) const {
  Status missing;
  const json* v = Get(key, required, &missing);
  if (!missing.ok()) return missing;
  if (v == nullptr) return std::max<int64_t>(min, 0);
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(max)) {
      return Error(key, "is " + std::to_string(u) + ", over " + std::to_string(max));
    }
    return static_cast<int64_t>(u);
  }
  if (!v->is_number_integer()) return Error(key, "is a " + TypeOf(*v) + ", expected an integer");
  int64_t i = v->get<int64_t>();
  if (i < min || i > max) {
    return Error(key, "is " + std::to_string(i) + ", outside " + std::to_string(min) + ".." +
                          std::to_string(max));
  }
  return i;
}

StatusOr<bool> Fields::Bool(const char* key, bool required) const {
  Status missing;
  const json* v = Get(key, required, &missing);
  if (!missing.ok()) return missing;
  if (v == nullptr) return false;
  if (!v->is_boolean()) return Error(key, "is a " + TypeOf(*v) + ", expected true or false");
  return v->get<bool>();
}

StatusOr<std::vector<std::string>> Fields::Strings(const char* key, bool required) const {
  Status missing;
  const json* v = Get(key, required, &missing);
  if (!missing.ok()) return missing;
  std::vector<std::string> out;
  if (v == nullptr) return out;
  if (!v->is_array()) return Error(key, "is a " + TypeOf(*v) + ", expected a list of strings");
  out.reserve(v->size());
  for (const json& s : *v) {
    if (!s.is_string()) return Error(key, "holds a " + TypeOf(s) + ", expected only strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

StatusOr<CreatedBox> CreatedBoxFromJson(const json& j) {
  Fields f(j, "the server's answer to create box");
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
  Fields box(j, "the server's box info");
  const json* log = box.Find("egress");
  if (log == nullptr) return std::vector<EgressRecord>{};
  if (!log->is_array()) return box.Error("egress", "is not an array");
  constexpr size_t kMaxRecords = 1000;  // a box keeps no more (Box::EgressLog)
  const size_t skip = log->size() > kMaxRecords ? log->size() - kMaxRecords : 0;
  std::vector<EgressRecord> out;
  for (size_t i = skip; i < log->size(); ++i) {
    if (!(*log)[i].is_object()) return box.Error("egress", "holds a record that is not an object");
    Fields f((*log)[i], "the server's egress record");
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

StatusOr<ExecResult> ExecResultFromJson(const json& j) {
  Fields f(j, "the server's exec result");
  ExecResult r;
  ASSIGN_OR_RETURN(int64_t exit_code, f.Integer("exit_code", -1, 255));
  ASSIGN_OR_RETURN(int64_t signal, f.Integer("signal", 0, 64, false));
  r.exit_code = static_cast<int>(exit_code);
  r.signal = static_cast<int>(signal);
  ASSIGN_OR_RETURN(r.stdout_data, f.String("stdout"));
  ASSIGN_OR_RETURN(r.stderr_data, f.String("stderr"));
  ASSIGN_OR_RETURN(r.timed_out, f.Bool("timed_out"));
  ASSIGN_OR_RETURN(r.out_of_memory, f.Bool("out_of_memory", false));
  ASSIGN_OR_RETURN(r.output_truncated, f.Bool("output_truncated", false));
  ASSIGN_OR_RETURN(int64_t ms, f.Integer("duration_ms", 0, kMaxMillis, false));
  r.duration = std::chrono::milliseconds(ms);
  ASSIGN_OR_RETURN(r.driver, f.String("driver", false));
  r.driver = base::TerminalSafe(r.driver, 64);
  return r;
}

StatusOr<ExecResult> ProcessResultFromJson(const json& j) {
  ASSIGN_OR_RETURN(ExecResult r, ExecResultFromJson(j));
  Fields f(j, "the server's process result");
  ASSIGN_OR_RETURN(int64_t out, f.Integer("dropped_stdout", 0, kMaxBytes, false));
  ASSIGN_OR_RETURN(int64_t err, f.Integer("dropped_stderr", 0, kMaxBytes, false));
  r.dropped_stdout = static_cast<uint64_t>(out);
  r.dropped_stderr = static_cast<uint64_t>(err);
  return r;
}

StatusOr<std::vector<ProcessInfo>> ProcessListFromJson(const json& j) {
  Fields f(j, "the server's process list");
  const json* list = f.Find("processes");
  if (list == nullptr || !list->is_array()) return f.Error("processes", "is not a list");
  if (list->size() > 256) return f.Error("processes", "has more than 256 entries");
  std::vector<ProcessInfo> out;
  for (const json& item : *list) {
    if (!item.is_object()) return f.Error("processes", "holds an entry that is not an object");
    Fields e(item, "the server's process entry");
    ProcessInfo p;
    ASSIGN_OR_RETURN(int64_t pid, e.Integer("pid", 1, 1 << 22));
    p.pid = static_cast<int>(pid);
    ASSIGN_OR_RETURN(p.argv, e.Strings("argv"));
    if (p.argv.size() > 8) return e.Error("argv", "has more than 8 arguments");
    for (std::string& arg : p.argv) arg = base::TerminalSafe(arg, 128);
    ASSIGN_OR_RETURN(p.tty, e.Bool("tty", false));
    ASSIGN_OR_RETURN(p.background, e.Bool("background", false));
    ASSIGN_OR_RETURN(int64_t started, e.Integer("started_unix_ms", 0, kMaxMillis, false));
    p.started = std::chrono::system_clock::time_point(std::chrono::milliseconds(started));
    ASSIGN_OR_RETURN(std::string state, e.String("state"));
    if (state != "running" && state != "exited") {
      return e.Error("state", "is neither \"running\" nor \"exited\"");
    }
    p.running = state == "running";
    if (!p.running) {
      ExecResult r;
      ASSIGN_OR_RETURN(int64_t code, e.Integer("exit_code", -1, 255));
      ASSIGN_OR_RETURN(int64_t sig, e.Integer("signal", 0, 64, false));
      ASSIGN_OR_RETURN(r.timed_out, e.Bool("timed_out", false));
      ASSIGN_OR_RETURN(r.out_of_memory, e.Bool("out_of_memory", false));
      ASSIGN_OR_RETURN(int64_t ms, e.Integer("duration_ms", 0, kMaxMillis, false));
      r.exit_code = static_cast<int>(code);
      r.signal = static_cast<int>(sig);
      r.duration = std::chrono::milliseconds(ms);
      p.exit = std::move(r);
    }
    uint64_t* counts[] = {&p.stdout_bytes, &p.stderr_bytes, &p.dropped_stdout, &p.dropped_stderr};
    const char* names[] = {"stdout_bytes", "stderr_bytes", "dropped_stdout", "dropped_stderr"};
    for (size_t i = 0; i < 4; ++i) {
      ASSIGN_OR_RETURN(int64_t n, e.Integer(names[i], 0, kMaxBytes, false));
      *counts[i] = static_cast<uint64_t>(n);
    }
    out.push_back(std::move(p));
  }
  return out;
}

StatusOr<CellResult> CellResultFromJson(const json& j, std::string_view what) {
  if (!j.is_object()) {
    return ProtocolError(std::string(what) + " is a JSON " + TypeOf(j) + ", not an object");
  }
  Fields f(j, std::string(what));
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
  Fields f(j, "the server's cell result");
  Execution e;
  if (const json* logs = f.Find("logs")) {
    if (!logs->is_object())
      return f.Error("logs", "is a " + TypeOf(*logs) + ", expected an object");
    Fields l(*logs, f.what() + ": logs");
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
    Fields ef(*error, f.what() + ": error");
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
  ASSIGN_OR_RETURN(json j, ParseObject(data, what));
  return Fields(j, what).String("text");
}

Status ErrorEventFromJson(std::string_view data) {
  auto j = ParseObject(data, "the server's error event");
  if (!j.ok()) return j.status();
  const json* error = Fields(*j, "").Find("error");
  if (error == nullptr || !error->is_object()) {
    return ProtocolError("the server's error event has no {\"error\": {...}} object");
  }
  Fields f(*error, "the server's error event");
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
  std::string what = "the server's listing of " + box::ShowName(dir);
  const json* list = Fields(j, what).Find("entries");
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
    Fields f(item, what);
    FileEntry e;
    ASSIGN_OR_RETURN(e.name, f.String("name"));
    // The same check as a local box's listing: the name is the box's.
    RETURN_IF_ERROR(box::CheckNameStaysInDirectory(e.name).WithContext(what));
    ASSIGN_OR_RETURN(e.path, f.String("path"));
    bool under =
        e.path.size() > e.name.size() + 1 && e.path.front() == '/' &&
        e.path.compare(e.path.size() - e.name.size() - 1, std::string::npos, "/" + e.name) == 0;
    // "/" lists as "/name": the parent part is then empty.
    if (!under && e.path == "/" + e.name) under = true;
    if (!under) {
      return f.Error("path", box::ShowName(e.path) + " is not the directory + \"/\" + " +
                                 box::ShowName(e.name));
    }
    std::string this_parent = e.path.substr(0, e.path.size() - e.name.size() - 1);
    if (entries.empty()) parent = this_parent;
    if (this_parent != parent) {
      return f.Error("path", box::ShowName(e.path) + " is not in " + box::ShowName(parent) +
                                 " like the entries before it");
    }
    ASSIGN_OR_RETURN(e.type, f.String("type"));
    if (e.type != "file" && e.type != "dir" && e.type != "symlink" && e.type != "other") {
      return f.Error("type", "is " + box::ShowName(e.type) + ", not file, dir, symlink or other");
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
