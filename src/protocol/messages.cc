#include "protocol/messages.h"

#include <algorithm>
#include <type_traits>

#include "base/text.h"
#include "protocol/field_reader.h"

namespace codebox::protocol::msg {
namespace {

// Error texts from a peer are shown to users; past this they are cut.
constexpr size_t kMaxErrorText = 4096;
// A pid in the box (pid_max is at most 2^22).
constexpr int64_t kMaxPid = 1 << 22;

// `field` as {"uid": U, "gid": G}, or nullopt when absent.
StatusOr<std::optional<User>> DecodeUser(FieldReader& r, const char* field, std::string_view what) {
  const Json* value = r.Find(field);
  if (value == nullptr) return std::optional<User>();
  if (!value->is_object()) return r.Fault(field, "is not an object with \"uid\" and \"gid\"");
  std::string inner = std::string(what) + ": " + field;
  FieldReader u(*value, inner, /*nested=*/true);
  ASSIGN_OR_RETURN(int64_t uid, u.Int("uid", 0, kMaxId));
  ASSIGN_OR_RETURN(int64_t gid, u.Int("gid", 0, kMaxId));
  RETURN_IF_ERROR(u.CheckNoUnknown());
  return std::optional<User>(User{static_cast<uint32_t>(uid), static_cast<uint32_t>(gid)});
}

void PutUser(Json& j, const char* field, const std::optional<User>& user) {
  if (user) j[field] = Json{{"uid", user->uid}, {"gid", user->gid}};
}

// "rows" and "cols" of `r`, each 1..kMaxTerminalSide.
StatusOr<TerminalSize> ReadTerminalSize(FieldReader& r) {
  ASSIGN_OR_RETURN(int64_t rows, r.Int("rows", 1, kMaxTerminalSide));
  ASSIGN_OR_RETURN(int64_t cols, r.Int("cols", 1, kMaxTerminalSide));
  return TerminalSize{static_cast<uint16_t>(rows), static_cast<uint16_t>(cols)};
}

// exec's `tty` as {"rows": R, "cols": C}, or nullopt when absent.
StatusOr<std::optional<TerminalSize>> DecodeTty(FieldReader& r) {
  const Json* value = r.Find("tty");
  if (value == nullptr) return std::optional<TerminalSize>();
  if (!value->is_object()) return r.Fault("tty", "is not an object with \"rows\" and \"cols\"");
  FieldReader t(*value, "exec request: tty", /*nested=*/true);
  ASSIGN_OR_RETURN(TerminalSize size, ReadTerminalSize(t));
  RETURN_IF_ERROR(t.CheckNoUnknown());
  return std::optional<TerminalSize>(size);
}

StatusOr<Request> DecodeExec(const Json& m) {
  FieldReader r(m, "exec request");
  Exec e;
  ASSIGN_OR_RETURN(e.argv, r.Strings("argv"));
  if (e.argv.empty()) return r.Fault("argv", "is empty");
  if (const Json* env = r.Find("env")) {
    if (!env->is_object()) return r.Fault("env", "is not an object of strings");
    for (auto it = env->begin(); it != env->end(); ++it) {
      if (!it.value().is_string()) return r.Fault("env", "holds a value that is not a string");
      e.env.emplace(it.key(), it.value().get_ref<const std::string&>());
    }
  }
  ASSIGN_OR_RETURN(e.cwd, r.String("cwd", std::string("/")));
  ASSIGN_OR_RETURN(std::string stdin_mode, r.String("stdin", std::string("none")));
  if (stdin_mode != "stream" && stdin_mode != "none") {
    return r.Fault("stdin", "must be \"stream\" or \"none\"");
  }
  e.stdin_stream = stdin_mode == "stream";
  ASSIGN_OR_RETURN(int64_t timeout_ms, r.Int("timeout_ms", 0, kInt64Max, 0));
  e.timeout = timeout_ms == 0 ? kNoTimeout : std::chrono::milliseconds(timeout_ms);
  ASSIGN_OR_RETURN(int64_t limit,
                   r.Int("output_limit", 0, kInt64Max, static_cast<int64_t>(e.output_limit)));
  e.output_limit = static_cast<uint64_t>(limit);
  ASSIGN_OR_RETURN(e.user, DecodeUser(r, "user", "exec request"));
  ASSIGN_OR_RETURN(e.tty, DecodeTty(r));
  ASSIGN_OR_RETURN(e.background, r.Bool("background", false));
  ASSIGN_OR_RETURN(int64_t ring, r.Int("ring_bytes", 0, static_cast<int64_t>(kMaxRingBytes),
                                       static_cast<int64_t>(kDefaultRingBytes)));
  e.ring_bytes = static_cast<uint64_t>(ring);
  RETURN_IF_ERROR(r.CheckNoUnknown());
  return Request(std::move(e));
}

template <typename T>
StatusOr<Request> DecodePathMode(const Json& m, const char* what, uint32_t default_mode) {
  FieldReader r(m, what);
  T t;
  ASSIGN_OR_RETURN(t.path, r.String("path"));
  ASSIGN_OR_RETURN(int64_t mode, r.Int("mode", 0, kMaxMode, default_mode));
  t.mode = static_cast<uint32_t>(mode);
  ASSIGN_OR_RETURN(t.parents, r.Bool("parents", false));
  ASSIGN_OR_RETURN(t.owner, DecodeUser(r, "owner", what));
  RETURN_IF_ERROR(r.CheckNoUnknown());
  return Request(std::move(t));
}

template <typename T>
StatusOr<Request> DecodePath(const Json& m, const char* what) {
  FieldReader r(m, what);
  T t;
  ASSIGN_OR_RETURN(t.path, r.String("path"));
  RETURN_IF_ERROR(r.CheckNoUnknown());
  return Request(std::move(t));
}

StatusOr<DirEntry> DecodeEntry(const Json& j) {
  if (!j.is_object()) return ProtocolError("entries event: an entry is not an object");
  FieldReader r(j, "entries event: entry");
  DirEntry d;
  ASSIGN_OR_RETURN(d.name, r.String("name"));
  ASSIGN_OR_RETURN(d.type, r.String("type"));
  if (d.type != "file" && d.type != "dir" && d.type != "symlink" && d.type != "other") {
    return r.Fault("type", "is not one of file, dir, symlink, other");
  }
  ASSIGN_OR_RETURN(int64_t size, r.Int("size", 0, kInt64Max));
  ASSIGN_OR_RETURN(int64_t mode, r.Int("mode", 0, kMaxMode));
  d.size = static_cast<uint64_t>(size);
  d.mode = static_cast<uint32_t>(mode);
  RETURN_IF_ERROR(r.CheckNoUnknown());
  return d;
}

Json EntryJson(const DirEntry& d) {
  return Json{{"name", d.name}, {"type", d.type}, {"size", d.size}, {"mode", d.mode}};
}

// The exit fields shared by `exit` and a process entry's `exit`.
Json ExitJson(const Exit& e) {
  Json j{{"exit_code", e.exit_code},     {"signal", e.signal},
         {"timed_out", e.timed_out},     {"output_truncated", e.output_truncated},
         {"duration_ms", e.duration_ms}, {"out_of_memory", e.out_of_memory}};
  // Only on attach streams, where bytes can fall out of a ring.
  if (e.dropped_stdout > 0) j["dropped_stdout"] = e.dropped_stdout;
  if (e.dropped_stderr > 0) j["dropped_stderr"] = e.dropped_stderr;
  return j;
}

StatusOr<Exit> DecodeExitFields(FieldReader& r, const std::string& what) {
  Exit e;
  ASSIGN_OR_RETURN(int64_t code, r.Int("exit_code", kMinExitCode, kMaxExitCode));
  ASSIGN_OR_RETURN(int64_t sig, r.Int("signal", 0, kMaxSignal));
  ASSIGN_OR_RETURN(e.timed_out, r.Bool("timed_out"));
  ASSIGN_OR_RETURN(e.output_truncated, r.Bool("output_truncated"));
  ASSIGN_OR_RETURN(e.duration_ms, r.Int("duration_ms", 0, kInt64Max));
  ASSIGN_OR_RETURN(e.out_of_memory, r.Bool("out_of_memory", false));
  ASSIGN_OR_RETURN(int64_t dropped_out, r.Int("dropped_stdout", 0, kInt64Max, 0));
  ASSIGN_OR_RETURN(int64_t dropped_err, r.Int("dropped_stderr", 0, kInt64Max, 0));
  e.exit_code = static_cast<int32_t>(code);
  e.signal = static_cast<int32_t>(sig);
  e.dropped_stdout = static_cast<uint64_t>(dropped_out);
  e.dropped_stderr = static_cast<uint64_t>(dropped_err);
  if ((e.exit_code == -1) != (e.signal != 0)) {
    return ProtocolError(what + ": exit_code " + std::to_string(code) + " with signal " +
                         std::to_string(sig) + " (-1 goes with a signal, and only it)");
  }
  return e;
}

Json ProcessJson(const ProcessEntry& e) {
  Json j{{"pid", e.pid},
         {"argv", e.argv},
         {"tty", e.tty},
         {"background", e.background},
         {"started_unix_ms", e.started_unix_ms},
         {"running", e.running},
         {"stdout_bytes", e.stdout_bytes},
         {"stderr_bytes", e.stderr_bytes},
         {"dropped_stdout", e.dropped_stdout},
         {"dropped_stderr", e.dropped_stderr}};
  if (e.exit) j["exit"] = ExitJson(*e.exit);
  return j;
}

// One entry of a `processes` event; every bound of kMaxListed* is checked.
StatusOr<ProcessEntry> DecodeProcess(const Json& j) {
  if (!j.is_object()) return ProtocolError("processes event: an entry is not an object");
  FieldReader r(j, "processes event: entry");
  ProcessEntry e;
  ASSIGN_OR_RETURN(int64_t pid, r.Int("pid", 1, kMaxPid));
  e.pid = static_cast<int32_t>(pid);
  ASSIGN_OR_RETURN(e.argv, r.Strings("argv"));
  if (e.argv.size() > kMaxListedArgs) return r.Fault("argv", "has too many arguments");
  for (const std::string& arg : e.argv) {
    if (arg.size() > kMaxListedArgBytes) return r.Fault("argv", "holds a too long argument");
  }
  ASSIGN_OR_RETURN(e.tty, r.Bool("tty"));
  ASSIGN_OR_RETURN(e.background, r.Bool("background"));
  ASSIGN_OR_RETURN(e.started_unix_ms, r.Int("started_unix_ms", 0, kInt64Max));
  ASSIGN_OR_RETURN(e.running, r.Bool("running"));
  uint64_t* counters[] = {&e.stdout_bytes, &e.stderr_bytes, &e.dropped_stdout, &e.dropped_stderr};
  const char* names[] = {"stdout_bytes", "stderr_bytes", "dropped_stdout", "dropped_stderr"};
  for (size_t i = 0; i < 4; ++i) {
    ASSIGN_OR_RETURN(int64_t n, r.Int(names[i], 0, kInt64Max));
    *counters[i] = static_cast<uint64_t>(n);
  }
  if (const Json* exit = r.Find("exit")) {
    if (!exit->is_object()) return r.Fault("exit", "is not an object");
    FieldReader x(*exit, "processes event: entry: exit", /*nested=*/true);
    ASSIGN_OR_RETURN(Exit parsed, DecodeExitFields(x, "processes event: entry: exit"));
    RETURN_IF_ERROR(x.CheckNoUnknown());
    e.exit = parsed;
  }
  RETURN_IF_ERROR(r.CheckNoUnknown());
  if (e.running == e.exit.has_value()) {
    return ProtocolError("processes event: entry: an exit goes with running false, and only it");
  }
  return e;
}

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

}  // namespace

std::string_view RequestName(const Request& request) {
  static constexpr std::string_view kNames[] = {
      "exec",        "write_file", "read_file",      "list_dir",      "mkdir", "kill",
      "shutdown",    "cancel",     "remove",         "egress_accept", "ack",   "resize",
      "await_hello", "attach",     "list_processes", "signal_process"};
  return kNames[request.index()];
}

std::string_view EventName(const Event& event) {
  static constexpr std::string_view kNames[] = {"exit",      "done", "file",    "entries",  "error",
                                                "connected", "ack",  "started", "processes"};
  return kNames[event.index()];
}

std::string EncodeHello(const Hello& hello) {
  Json j{{"protocol", hello.protocol}};
  if (!hello.client.empty()) j["client"] = hello.client;
  if (!hello.agent.empty()) j["agent"] = hello.agent;
  if (hello.pid) j["pid"] = *hello.pid;
  if (const GuestSetup* g = hello.guest ? &*hello.guest : nullptr) {
    j["guest"] = Json{{"entropy", base::HexEncode(g->entropy)},
                      {"time_ns", g->time_unix_ns},
                      {"resend_hello", g->resend_hello},
                      {"max_processes", g->max_processes},
                      {"memory_bytes", g->memory_bytes}};
  }
  return DumpControl(j);
}

namespace {

// An exec's timeout on the wire: 0 is kNoTimeout; a limit is at least 1 ms (the host checks
// timeouts before they get here; a stray 0 must not turn into "none").
int64_t TimeoutMs(std::chrono::milliseconds timeout) {
  return timeout == kNoTimeout ? 0 : std::max<int64_t>(1, timeout.count());
}

// hello's `guest`: every field checked, none unknown (it is ours, not a later version's).
StatusOr<std::optional<GuestSetup>> DecodeGuestSetup(FieldReader& r) {
  const Json* value = r.Find("guest");
  if (value == nullptr) return std::optional<GuestSetup>();
  if (!value->is_object()) return r.Fault("guest", "is not an object");
  FieldReader g(*value, "hello: guest", /*nested=*/true);
  GuestSetup setup;
  ASSIGN_OR_RETURN(std::string hex, g.String("entropy"));
  auto bytes = base::HexDecode(hex);
  if (!bytes || bytes->size() != kGuestEntropyBytes) {
    return g.Fault("entropy", "is not " + std::to_string(kGuestEntropyBytes) + " bytes in hex");
  }
  setup.entropy = std::move(*bytes);
  ASSIGN_OR_RETURN(setup.time_unix_ns, g.Int("time_ns", 0, kInt64Max));
  ASSIGN_OR_RETURN(setup.resend_hello, g.Bool("resend_hello", false));
  ASSIGN_OR_RETURN(setup.max_processes, g.Int("max_processes", 0, 1 << 22, 0));
  ASSIGN_OR_RETURN(setup.memory_bytes, g.Int("memory_bytes", 0, kInt64Max, 0));
  RETURN_IF_ERROR(g.CheckNoUnknown());
  return std::optional<GuestSetup>(std::move(setup));
}

}  // namespace

StatusOr<Hello> DecodeHello(const Json& m) {
  // Open to unknown fields: a later version may add some, and must still be told it differs.
  FieldReader r(m, "hello");
  Hello h;
  ASSIGN_OR_RETURN(h.protocol, r.Int("protocol", 0, kInt64Max));
  ASSIGN_OR_RETURN(h.client, r.String("client", std::string()));
  ASSIGN_OR_RETURN(h.agent, r.String("agent", std::string()));
  if (r.Find("pid") != nullptr) {
    ASSIGN_OR_RETURN(int64_t pid, r.Int("pid", 0, std::numeric_limits<int32_t>::max()));
    h.pid = pid;
  }
  ASSIGN_OR_RETURN(h.guest, DecodeGuestSetup(r));
  return h;
}

std::string EncodeRequest(const Request& request) {
  Json j = std::visit(
      Overloaded{
          [](const Exec& e) {
            Json j{{"op", "exec"},
                   {"argv", e.argv},
                   {"env", e.env},
                   {"cwd", e.cwd},
                   {"stdin", e.stdin_stream ? "stream" : "none"},
                   {"timeout_ms", TimeoutMs(e.timeout)},
                   {"output_limit", e.output_limit}};
            PutUser(j, "user", e.user);
            // Only when asked for: a peer that predates the field refuses it, and an exec
            // without it means pipes, as it always did.
            if (e.tty) j["tty"] = Json{{"rows", e.tty->rows}, {"cols", e.tty->cols}};
            if (e.background) j["background"] = true;
            if (e.ring_bytes != kDefaultRingBytes) j["ring_bytes"] = e.ring_bytes;
            return j;
          },
          [](const WriteFile& w) {
            Json j{
                {"op", "write_file"}, {"path", w.path}, {"mode", w.mode}, {"parents", w.parents}};
            PutUser(j, "owner", w.owner);
            return j;
          },
          [](const ReadFile& r) {
            return Json{{"op", "read_file"}, {"path", r.path}};
          },
          [](const ListDir& l) {
            return Json{{"op", "list_dir"}, {"path", l.path}};
          },
          [](const MakeDir& m) {
            Json j{{"op", "mkdir"}, {"path", m.path}, {"mode", m.mode}, {"parents", m.parents}};
            PutUser(j, "owner", m.owner);
            return j;
          },
          [](const Kill& k) {
            return Json{{"op", "kill"}, {"target", k.target}, {"signal", k.signal}};
          },
          [](const Shutdown&) {
            return Json{{"op", "shutdown"}};
          },
          [](const AwaitHello&) {
            return Json{{"op", "await_hello"}};
          },
          [](const Cancel& c) {
            return Json{{"op", "cancel"}, {"target", c.target}};
          },
          [](const Remove& r) {
            return Json{{"op", "remove"}, {"path", r.path}};
          },
          [](const EgressAccept&) {
            return Json{{"op", "egress_accept"}};
          },
          [](const EgressAck& a) {
            return Json{{"op", "ack"}, {"bytes", a.bytes}};
          },
          [](const Resize& z) {
            return Json{{"op", "resize"},
                        {"target", z.target},
                        {"rows", z.size.rows},
                        {"cols", z.size.cols}};
          },
          [](const Attach& a) {
            return Json{{"op", "attach"}, {"pid", a.pid}, {"output", a.output}};
          },
          [](const ListProcesses&) {
            return Json{{"op", "list_processes"}};
          },
          [](const SignalProcess& k) {
            return Json{
                {"op", "signal_process"}, {"pid", k.pid}, {"signal", k.signal}, {"tree", k.tree}};
          },
      },
      request);
  return DumpControl(j);
}

StatusOr<Request> DecodeRequest(const Json& m) {
  if (!m.is_object()) return ProtocolError("request is not a JSON object");
  auto op_it = m.find("op");
  if (op_it == m.end() || !op_it->is_string()) {
    return ProtocolError("request: field \"op\" is missing or not a string");
  }
  const std::string& op = op_it->get_ref<const std::string&>();
  if (op == "exec") return DecodeExec(m);
  if (op == "write_file") return DecodePathMode<WriteFile>(m, "write_file request", 0644);
  if (op == "mkdir") return DecodePathMode<MakeDir>(m, "mkdir request", 0755);
  if (op == "read_file") return DecodePath<ReadFile>(m, "read_file request");
  if (op == "list_dir") return DecodePath<ListDir>(m, "list_dir request");
  if (op == "remove") return DecodePath<Remove>(m, "remove request");
  if (op == "kill") {
    FieldReader r(m, "kill request");
    Kill k;
    ASSIGN_OR_RETURN(int64_t target, r.Int("target", 1, std::numeric_limits<uint32_t>::max()));
    ASSIGN_OR_RETURN(int64_t sig, r.Int("signal", 0, kMaxSignal, 9));
    RETURN_IF_ERROR(r.CheckNoUnknown());
    k.target = static_cast<uint32_t>(target);
    k.signal = static_cast<int32_t>(sig);
    return Request(k);
  }
  if (op == "resize") {
    FieldReader r(m, "resize request");
    ASSIGN_OR_RETURN(int64_t target, r.Int("target", 1, std::numeric_limits<uint32_t>::max()));
    ASSIGN_OR_RETURN(TerminalSize size, ReadTerminalSize(r));
    RETURN_IF_ERROR(r.CheckNoUnknown());
    return Request(Resize{static_cast<uint32_t>(target), size});
  }
  if (op == "attach") {
    FieldReader r(m, "attach request");
    ASSIGN_OR_RETURN(int64_t pid, r.Int("pid", 1, kMaxPid));
    ASSIGN_OR_RETURN(bool output, r.Bool("output", true));
    RETURN_IF_ERROR(r.CheckNoUnknown());
    return Request(Attach{static_cast<int32_t>(pid), output});
  }
  if (op == "list_processes") {
    FieldReader r(m, "list_processes request");
    RETURN_IF_ERROR(r.CheckNoUnknown());
    return Request(ListProcesses{});
  }
  if (op == "signal_process") {
    FieldReader r(m, "signal_process request");
    SignalProcess k;
    ASSIGN_OR_RETURN(int64_t pid, r.Int("pid", 1, kMaxPid));
    ASSIGN_OR_RETURN(int64_t sig, r.Int("signal", 0, kMaxSignal, 9));
    ASSIGN_OR_RETURN(k.tree, r.Bool("tree", false));
    RETURN_IF_ERROR(r.CheckNoUnknown());
    k.pid = static_cast<int32_t>(pid);
    k.signal = static_cast<int32_t>(sig);
    return Request(k);
  }
  if (op == "cancel") {
    FieldReader r(m, "cancel request");
    ASSIGN_OR_RETURN(int64_t target, r.Int("target", 1, std::numeric_limits<uint32_t>::max()));
    RETURN_IF_ERROR(r.CheckNoUnknown());
    return Request(Cancel{static_cast<uint32_t>(target)});
  }
  if (op == "shutdown") {
    FieldReader r(m, "shutdown request");
    RETURN_IF_ERROR(r.CheckNoUnknown());
    return Request(Shutdown{});
  }
  if (op == "await_hello") {
    FieldReader r(m, "await_hello request");
    RETURN_IF_ERROR(r.CheckNoUnknown());
    return Request(AwaitHello{});
  }
  if (op == "egress_accept") {
    FieldReader r(m, "egress_accept request");
    RETURN_IF_ERROR(r.CheckNoUnknown());
    return Request(EgressAccept{});
  }
  if (op == "ack") {
    FieldReader r(m, "ack request");
    ASSIGN_OR_RETURN(int64_t bytes, r.Int("bytes", 1, static_cast<int64_t>(kEgressWindow)));
    RETURN_IF_ERROR(r.CheckNoUnknown());
    return Request(EgressAck{static_cast<uint64_t>(bytes)});
  }
  return ProtocolError("unknown op \"" + base::TerminalSafe(op, 64) + "\"");
}

StatusOr<Request> DecodeRequestPayload(std::string_view payload) {
  ASSIGN_OR_RETURN(Json j, ParseControl(payload));
  return DecodeRequest(j);
}

std::string EncodeEvent(const Event& event) {
  Json j =
      std::visit(Overloaded{
                     [](const Exit& e) {
                       Json j = ExitJson(e);
                       j["event"] = "exit";
                       return j;
                     },
                     [](const Done&) {
                       return Json{{"event", "done"}};
                     },
                     [](const File& f) {
                       return Json{{"event", "file"}, {"size", f.size}, {"mode", f.mode}};
                     },
                     [](const Entries& e) {
                       Json list = Json::array();
                       for (const DirEntry& d : e.entries) list.push_back(EntryJson(d));
                       Json j{{"event", "entries"}, {"entries", std::move(list)}};
                       if (e.more) j["more"] = true;
                       return j;
                     },
                     [](const Error& e) {
                       return Json{{"event", "error"}, {"code", e.code}, {"message", e.message}};
                     },
                     [](const Connected&) {
                       return Json{{"event", "connected"}};
                     },
                     [](const Ack& a) {
                       return Json{{"event", "ack"}, {"bytes", a.bytes}};
                     },
                     [](const Started& s) {
                       return Json{{"event", "started"}, {"pid", s.pid}};
                     },
                     [](const Processes& p) {
                       Json list = Json::array();
                       for (const ProcessEntry& e : p.processes) list.push_back(ProcessJson(e));
                       return Json{{"event", "processes"}, {"processes", std::move(list)}};
                     },
                 },
                 event);
  return DumpControl(j);
}

StatusOr<Event> DecodeEvent(const Json& m) {
  if (!m.is_object()) return ProtocolError("event is not a JSON object");
  auto ev_it = m.find("event");
  if (ev_it == m.end() || !ev_it->is_string()) {
    return ProtocolError("event: field \"event\" is missing or not a string");
  }
  const std::string& name = ev_it->get_ref<const std::string&>();
  std::string what = base::TerminalSafe(name, 64) + " event";
  FieldReader r(m, what);
  if (name == "exit") {
    ASSIGN_OR_RETURN(Exit e, DecodeExitFields(r, what));
    RETURN_IF_ERROR(r.CheckNoUnknown());
    return Event(e);
  }
  if (name == "started") {
    ASSIGN_OR_RETURN(int64_t pid, r.Int("pid", 1, kMaxPid));
    RETURN_IF_ERROR(r.CheckNoUnknown());
    return Event(Started{static_cast<int32_t>(pid)});
  }
  if (name == "processes") {
    const Json* list = r.Find("processes");
    if (list == nullptr || !list->is_array()) return r.Fault("processes", "is not an array");
    RETURN_IF_ERROR(r.CheckNoUnknown());
    if (list->size() > kMaxListedProcesses) {
      return r.Fault("processes", "lists more than " + std::to_string(kMaxListedProcesses));
    }
    Processes p;
    for (const Json& j : *list) {
      ASSIGN_OR_RETURN(ProcessEntry e, DecodeProcess(j));
      p.processes.push_back(std::move(e));
    }
    return Event(std::move(p));
  }
  if (name == "done") {
    RETURN_IF_ERROR(r.CheckNoUnknown());
    return Event(Done{});
  }
  if (name == "connected") {
    RETURN_IF_ERROR(r.CheckNoUnknown());
    return Event(Connected{});
  }
  if (name == "ack") {
    ASSIGN_OR_RETURN(int64_t bytes, r.Int("bytes", 1, static_cast<int64_t>(kEgressWindow)));
    RETURN_IF_ERROR(r.CheckNoUnknown());
    return Event(Ack{static_cast<uint64_t>(bytes)});
  }
  if (name == "file") {
    File f;
    ASSIGN_OR_RETURN(int64_t size, r.Int("size", 0, kInt64Max));
    ASSIGN_OR_RETURN(int64_t mode, r.Int("mode", 0, kMaxMode));
    RETURN_IF_ERROR(r.CheckNoUnknown());
    f.size = static_cast<uint64_t>(size);
    f.mode = static_cast<uint32_t>(mode);
    return Event(f);
  }
  if (name == "entries") {
    Entries e;
    const Json* list = r.Find("entries");
    if (list == nullptr || !list->is_array()) return r.Fault("entries", "is not an array");
    ASSIGN_OR_RETURN(e.more, r.Bool("more", false));
    RETURN_IF_ERROR(r.CheckNoUnknown());
    for (const Json& j : *list) {
      ASSIGN_OR_RETURN(DirEntry d, DecodeEntry(j));
      e.entries.push_back(std::move(d));
    }
    return Event(std::move(e));
  }
  if (name == "error") {
    Error e;
    ASSIGN_OR_RETURN(e.code, r.String("code", std::string("io_error")));
    ASSIGN_OR_RETURN(e.message, r.String("message", std::string("(no message)")));
    RETURN_IF_ERROR(r.CheckNoUnknown());
    return Event(std::move(e));
  }
  return ProtocolError("unknown event \"" + base::TerminalSafe(name, 64) + "\"");
}

StatusOr<Event> DecodeEventPayload(std::string_view payload) {
  ASSIGN_OR_RETURN(Json j, ParseControl(payload));
  return DecodeEvent(j);
}

std::vector<std::string> EncodeEntriesPages(const std::vector<DirEntry>& entries,
                                            size_t max_page_bytes) {
  std::vector<std::string> pages;
  // {"entries":[...],"event":"entries","more":true} around the items, with room to spare.
  constexpr size_t kEnvelope = 64;
  Json page = Json::array();
  size_t page_bytes = kEnvelope;
  auto flush = [&](bool more) {
    Json j{{"event", "entries"}, {"entries", std::move(page)}};
    if (more) j["more"] = true;
    pages.push_back(DumpControl(j));
    page = Json::array();
    page_bytes = kEnvelope;
  };
  for (const DirEntry& d : entries) {
    Json item = EntryJson(d);
    size_t item_bytes = DumpControl(item).size() + 1;  // and a comma
    if (!page.empty() && page_bytes + item_bytes > max_page_bytes) flush(true);
    page.push_back(std::move(item));
    page_bytes += item_bytes;
  }
  flush(false);
  return pages;
}

Status StatusFromError(const Error& error) {
  std::string message = base::TerminalSafe(error.message, kMaxErrorText);
  const std::string& code = error.code;
  if (code == "not_found") return NotFound(message);
  if (code == "invalid_argument") return InvalidArgument(message);
  if (code == "permission_denied") return PermissionDenied(message);
  if (code == "protocol_error") return ProtocolError(message);
  return IoError(message);
}

}  // namespace codebox::protocol::msg
