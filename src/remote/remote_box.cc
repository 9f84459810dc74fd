#include "remote/remote_box.h"

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>

#include "api/box_record.h"
#include "api/egress_record.h"
#include "api/error.h"
#include "api/exec_result.h"
#include "api/execution.h"
#include "api/file_entry.h"
#include "api/files_query.h"
#include "api/process_info.h"
#include "api/requests.h"
#include "api/text_event.h"
#include "base/deadline.h"
#include "base/json_fields.h"
#include "base/text.h"
#include "host_files/host_files.h"
#include "remote/remote_copy.h"
#include "remote/server_api.h"

namespace codebox::remote {
namespace {

using nlohmann::json;

// What the HTTP API cannot do yet: a process the caller talks to while it runs, and terminals.
Status NotOnServerYet(const std::string& what) {
  return FailedPrecondition(what +
                            ": a box on a codebox server cannot do this yet (the HTTP API has no "
                            "route for it); run the box in this process (no BoxOptions::server; "
                            "--local for the CLI)");
}

// Returned from an event callback once `done` has come: the answer is complete, and the server
// may still be tidying up (a one-shot run destroys its box) before it ends the stream.
Status StopAfterDone() { return Status(StatusCode::kInternal, "the stream's result is in"); }

// A streaming callback's exception ends the call (closing the stream makes the server stop the
// exec or interrupt the cell), as it does for a local box; it must not unwind through the
// HTTP client.
template <class Fn, class Arg>
Status Deliver(const Fn& fn, const Arg& arg) {
  if (!fn) return Status::Ok();
  try {
    fn(arg);
  } catch (const std::exception& e) {
    return Internal(std::string("a callback threw: ") + e.what());
  } catch (...) {
    return Internal("a callback threw an exception");
  }
  return Status::Ok();
}

std::chrono::milliseconds RequestTimeout(std::chrono::milliseconds timeout,
                                         std::chrono::milliseconds margin) {
  if (timeout == kNoTimeout) return kStreamIdleTimeout;
  return timeout + margin;
}

// The answer of a streamed request: stdout/stderr events to the callbacks, other events to
// `on_other` (may be null), `done` decoded by `decode`, `error` as the call's Status; a server
// that answered without a stream is decoded whole.
template <class Result>
StatusOr<Result> ReadStream(
    const ServerApi& api, http::ClientRequest request,
    const std::function<void(std::string_view)>& on_stdout,
    const std::function<void(std::string_view)>& on_stderr, StatusOr<Result> (*decode)(const json&),
    const std::function<Status(std::string_view, std::string_view)>& on_other,
    std::string_view what) {
  std::optional<Result> result;
  Status failed;
  auto on_event = [&](std::string_view event, std::string_view data) -> Status {
    if (event == "stdout" || event == "stderr") {
      ASSIGN_OR_RETURN(std::string text, api::TextEventFromJson(data, event));
      return Deliver(event == "stdout" ? on_stdout : on_stderr, std::string_view(text));
    }
    if (event == "done") {
      ASSIGN_OR_RETURN(json j, base::ParseJsonObject(data, "the server's done event"));
      ASSIGN_OR_RETURN(result, decode(j));
      return StopAfterDone();
    }
    if (event == "error") {
      failed = api::ErrorEventFromJson(data);
      return Status::Ok();
    }
    return on_other ? on_other(event, data) : Status::Ok();
  };
  auto response = api.CallEvents(std::move(request), on_event, what);
  if (!failed.ok()) return failed.WithContext(what);
  if (result) return std::move(*result);
  if (!response.ok()) return response.status();
  if (!response->body.empty()) {  // the server answered without a stream
    ASSIGN_OR_RETURN(json j, base::ParseJsonObject(response->body,
                                                   "the server's answer to " + std::string(what)));
    return decode(j);
  }
  return ProtocolError(std::string(what) + ": the server's event stream ended without a result");
}

// An exec-like answer asked as an event stream. The server sends the output as events only (its
// `done` has it empty): kept here, as the caller's own options say. A `done` that carries output
// of its own (a server that sent no events for it) is kept as it is.
StatusOr<ExecResult> StreamExec(const ServerApi& api, http::ClientRequest request,
                                const ExecOptions& options, std::string_view what) {
  std::string out, err;
  bool streamed = false;
  auto keep = [&](std::string* kept, const std::function<void(std::string_view)>& next) {
    return [&options, &streamed, kept, &next](std::string_view chunk) {
      streamed = true;
      if (options.keep_output) kept->append(chunk);
      if (next) next(chunk);
    };
  };
  ASSIGN_OR_RETURN(ExecResult result,
                   ReadStream<ExecResult>(api, std::move(request), keep(&out, options.on_stdout),
                                          keep(&err, options.on_stderr), api::ExecResultFromJson,
                                          nullptr, what));
  if (streamed || !options.keep_output) {
    result.stdout_data = options.keep_output ? std::move(out) : std::string();
    result.stderr_data = options.keep_output ? std::move(err) : std::string();
  }
  return result;
}

// An exec-like request (exec, python, run): streamed when a callback wants the output as it
// comes or when there is no timeout (the stream's keep-alives then show the server is alive);
// else one JSON answer.
StatusOr<ExecResult> SendExec(const ServerApi& api, std::string target, const json& body,
                              const ExecOptions& options, std::chrono::milliseconds timeout,
                              std::string_view what) {
  http::ClientRequest request;
  request.method = "POST";
  request.target = std::move(target);
  ASSIGN_OR_RETURN(request.body, DumpJson(body, what));
  request.timeout = RequestTimeout(timeout, kExecMargin);
  if (!options.on_stdout && !options.on_stderr && timeout != kNoTimeout) {
    ASSIGN_OR_RETURN(http::ClientResponse response,
                     api.Call(request, http::ClientOptions{}.max_response_bytes, what));
    ASSIGN_OR_RETURN(json j, base::ParseJsonObject(response.body,
                                                   "the server's answer to " + std::string(what)));
    return api::ExecResultFromJson(j);
  }
  return StreamExec(api, std::move(request), options, what);
}

// A process of a box on a server (a background Box::Start, Box::Attach): every call is a
// request of its own; Wait() attaches (the events route) and returns its result. The process
// belongs to the box: destroying the handle ends nothing; Detach() before Wait() makes Wait()
// fail at once (a Wait() already streaming runs to the end).
class RemoteProcess final : public Process {
 public:
  RemoteProcess(ServerApi api, std::string target, int pid, ExecOptions options)
      : api_(std::move(api)), target_(std::move(target)), pid_(pid), options_(std::move(options)) {}

  static Status Signal(const ServerApi& api, const std::string& target, int sig, bool tree) {
    const std::string what = "signal " + std::to_string(sig) + " to " + target;
    if (tree) return api.CallNoContent("DELETE", target, "", kControlTimeout, what);
    return api.CallNoContent("POST", target + "/signal", api::SignalRequestToJson(sig).dump(),
                             kControlTimeout, what);
  }
  static Status Stdin(const ServerApi& api, const std::string& target, std::string_view data,
                      bool close) {
    const std::string what = "stdin of " + target;
    ASSIGN_OR_RETURN(std::string body,
                     DumpJson(api::StdinRequestToJson({std::string(data), close}), what));
    return api.CallNoContent("POST", target + "/stdin", body, kControlTimeout, what);
  }

  Status WriteStdin(std::string_view data) override { return Stdin(api_, target_, data, false); }
  Status CloseStdin() override { return Stdin(api_, target_, "", true); }
  Status Resize(TerminalSize) override {
    return NotOnServerYet("resize a process's terminal (Process::Resize)");
  }
  Status Signal(int sig) override { return Signal(api_, target_, sig, false); }
  Status Kill() override { return Signal(api_, target_, 9, true); }
  int pid() const override { return pid_; }
  void Detach() override { detached_ = true; }

  StatusOr<ExecResult> Wait() override {
    if (detached_) return FailedPrecondition("detached from process " + std::to_string(pid_));
    http::ClientRequest request;
    request.method = "GET";
    request.target = target_ + "/events";
    request.timeout = kStreamIdleTimeout;
    return StreamExec(api_, std::move(request), options_,
                      "attach to process " + std::to_string(pid_));
  }

 private:
  const ServerApi api_;
  const std::string target_;
  const int pid_;
  const ExecOptions options_;
  std::atomic<bool> detached_{false};
};

class RemoteBox final : public Box::Impl {
 public:
  // `asked`: when the create request was sent, so that this box's end comes no later than the
  // server's (which reaps it then).
  RemoteBox(ServerApi api, BoxOptions options, api::CreatedBox created,
            std::chrono::steady_clock::time_point asked)
      : api_(std::move(api)),
        options_(std::move(options)),
        id_(std::move(created.id)),
        base_("/v1/boxes/" + id_),
        info_(std::move(created.info)) {
    deadline_ = base::DeadlineAfter(asked, options_.box_timeout);
  }

  ~RemoteBox() override { (void)Destroy(); }

  StatusOr<ExecResult> Exec(std::vector<std::string> argv, const ExecOptions& options) override {
    if (argv.empty()) return InvalidArgument("exec: argv is empty; name the program to run");
    RETURN_IF_ERROR(CheckExec(options));
    const std::string what = "exec " + argv[0];
    return SendExec(api_, base_ + "/exec", api::ExecRequestToJson({std::move(argv), options}),
                    options, ExecTimeout(options), what);
  }

  // A background process only: the HTTP API has no request that a process lives as long as.
  StatusOr<std::unique_ptr<Process>> Start(std::vector<std::string> argv,
                                           const ExecOptions& options) override {
    if (!options.background) {
      return NotOnServerYet(
          "start an interactive process (Box::Start without ExecOptions::background)");
    }
    if (argv.empty()) return InvalidArgument("start: argv is empty; name the program to run");
    if (options.tty) return NotOnServerYet("start a process on a terminal (ExecOptions::tty)");
    RETURN_IF_ERROR(CheckExec(options));
    const std::string what = "start " + argv[0];
    ASSIGN_OR_RETURN(std::string text,
                     DumpJson(api::StartRequestToJson({std::move(argv), options}), what));
    ASSIGN_OR_RETURN(json started,
                     api_.CallJson("POST", base_ + "/processes", text, kControlTimeout, what));
    ASSIGN_OR_RETURN(int pid, api::ProcessStartedFromJson(started));
    return Attach(pid, options);
  }

  StatusOr<std::unique_ptr<Process>> Attach(int pid, const ExecOptions& options) override {
    RETURN_IF_ERROR(CheckUsable());
    if (pid <= 0) return InvalidArgument("attach: no process " + std::to_string(pid));
    return std::unique_ptr<Process>(std::make_unique<RemoteProcess>(
        api_, base_ + "/processes/" + std::to_string(pid), pid, options));
  }

  StatusOr<std::vector<ProcessInfo>> Processes() override {
    RETURN_IF_ERROR(CheckUsable());
    ASSIGN_OR_RETURN(
        json j, api_.CallJson("GET", base_ + "/processes", "", kControlTimeout, "list processes"));
    return api::ProcessListFromJson(j);
  }

  Status SignalProcess(int pid, int sig, bool tree) override {
    RETURN_IF_ERROR(CheckUsable());
    return RemoteProcess::Signal(api_, base_ + "/processes/" + std::to_string(pid), sig, tree);
  }

  Status SendStdin(int pid, std::string_view data, bool close) override {
    RETURN_IF_ERROR(CheckUsable());
    return RemoteProcess::Stdin(api_, base_ + "/processes/" + std::to_string(pid), data, close);
  }

  StatusOr<ExecResult> RunPython(std::string_view code, const ExecOptions& options) override {
    RETURN_IF_ERROR(CheckExec(options));
    return SendExec(api_, base_ + "/python", api::PythonRequestToJson({std::string(code), options}),
                    options, ExecTimeout(options), "exec python3");
  }

  // The server's routes serve a box's own session only (RunCodeOptions::session).
  static Status NoNamedSession(std::string_view session) {
    if (session.empty()) return Status::Ok();
    return Status(StatusCode::kFailedPrecondition,
                  "named code sessions run in boxes of this process only, not yet on a box of a "
                  "server");
  }

  StatusOr<Execution> RunCode(std::string_view code, const RunCodeOptions& options) override {
    if (options.timeout) RETURN_IF_ERROR(ValidateTimeout(*options.timeout, "run code timeout"));
    RETURN_IF_ERROR(NoNamedSession(options.session));
    RETURN_IF_ERROR(CheckUsable());
    std::chrono::milliseconds timeout = options.timeout.value_or(options_.exec_timeout);
    const json body = api::CellRequestToJson({std::string(code), options.timeout});
    http::ClientRequest request;
    request.method = "POST";
    request.target = base_ + "/run_code";
    ASSIGN_OR_RETURN(request.body, DumpJson(body, "run code"));
    // The first cell also starts the kernel; a cell past its timeout gets a grace to stop.
    request.timeout = RequestTimeout(timeout, 4 * kExecMargin);
    if (!options.on_stdout && !options.on_stderr && !options.on_result && timeout != kNoTimeout) {
      ASSIGN_OR_RETURN(
          json j, api_.CallJson("POST", request.target, request.body, request.timeout, "run code"));
      return api::ExecutionFromJson(j);
    }
    auto on_result = [&](std::string_view event, std::string_view data) -> Status {
      if (event != "result") return Status::Ok();
      ASSIGN_OR_RETURN(json j, base::ParseJsonObject(data, "the server's result event"));
      ASSIGN_OR_RETURN(CellResult r, api::CellResultFromJson(j, "the server's result event"));
      return Deliver(options.on_result, r);
    };
    return ReadStream<Execution>(api_, std::move(request), options.on_stdout, options.on_stderr,
                                 api::ExecutionFromJson, on_result, "run code");
  }

  Status RestartKernel(std::string_view session) override {
    RETURN_IF_ERROR(NoNamedSession(session));
    RETURN_IF_ERROR(CheckUsable());
    return api_.CallNoContent("POST", base_ + "/restart", "", kControlTimeout, "restart kernel");
  }

  Status EndCodeSession(std::string_view session) override { return NoNamedSession(session); }

  // Its own connection: it runs while another thread's RunCode streams.
  Status InterruptCode(std::string_view session) override {
    RETURN_IF_ERROR(NoNamedSession(session));
    if (IsDestroyed()) return Status::Ok();  // no cell runs in a destroyed box
    return api_.CallNoContent("POST", base_ + "/interrupt", "", kControlTimeout, "interrupt");
  }

  // The server prewarms its pool boxes itself.
  Status Prewarm(const PrewarmOptions&) override { return CheckUsable(); }

  Status CopyIn(const std::string& host_path, const std::string& box_path) override {
    RETURN_IF_ERROR(CheckUsable());
    ASSIGN_OR_RETURN(Upload upload, ReadForUpload(host_path));
    http::ClientRequest request;
    request.method = "PUT";
    request.target = FilesTarget({box_path, upload.mode});
    request.body = std::move(upload.body);
    request.content_type = upload.content_type;
    request.timeout = kFilesTimeout;
    auto response = api_.Call(request, 1 << 20, "copy in " + host_path);
    return response.ok() ? Status::Ok() : response.status();
  }

  Status CopyOut(const std::string& box_path, const std::string& host_path,
                 const CopyOutOptions& options) override {
    RETURN_IF_ERROR(CheckUsable());
    CopyOutOptions resolved = options;
    if (resolved.max_bytes == 0) resolved.max_bytes = DiskBytes();
    http::ClientRequest request;
    request.target = FilesTarget({box_path});
    request.timeout = kFilesTimeout;
    std::string what = "copy out " + host_files::ShowName(box_path);
    auto response = api_.Call(request, DownloadCap(resolved), what);
    if (!response.ok()) {
      if (response.status().code() != StatusCode::kLimitExceeded) return response.status();
      return LimitExceeded(what + ": more than the copy-out limit of " +
                           host_files::HumanBytes(resolved.max_bytes) +
                           "; pass a larger limit (CopyOutOptions::max_bytes, --copy-out-limit, "
                           "copy_out(..., max_bytes=...))");
    }
    return WriteDownload(*response, box_path, host_path, resolved);
  }

  Status WriteFile(const std::string& box_path, std::string_view data, uint32_t mode) override {
    RETURN_IF_ERROR(CheckUsable());
    http::ClientRequest request;
    request.method = "PUT";
    request.target = FilesTarget({box_path, mode});
    request.body = std::string(data);
    request.content_type = "application/octet-stream";
    request.timeout = kFilesTimeout;
    auto response = api_.Call(request, 1 << 20, "write file " + host_files::ShowName(box_path));
    return response.ok() ? Status::Ok() : response.status();
  }

  StatusOr<std::string> ReadFile(const std::string& box_path, uint64_t max_bytes) override {
    RETURN_IF_ERROR(CheckUsable());
    if (max_bytes == 0) max_bytes = DiskBytes();
    http::ClientRequest request;
    request.target = FilesTarget({box_path});
    request.timeout = kFilesTimeout;
    std::string what = "read file " + host_files::ShowName(box_path);
    // An error answer may be longer than a small max_bytes: the cap leaves it room, and the
    // data is held to max_bytes below.
    auto response = api_.Call(request, std::max<uint64_t>(max_bytes, 1 << 20), what);
    if (!response.ok() && response.status().code() == StatusCode::kLimitExceeded) {
      return LimitExceeded(what + ": larger than the limit of " +
                           host_files::HumanBytes(max_bytes) + "; pass a larger max_bytes");
    }
    if (!response.ok()) return response.status();
    if (response->body.size() > max_bytes) {  // whatever the client let through
      return LimitExceeded(what + ": larger than the limit of " +
                           host_files::HumanBytes(max_bytes) + "; pass a larger max_bytes");
    }
    auto type = response->headers.find("content-type");
    if (type != response->headers.end() && type->second.starts_with("application/x-tar")) {
      return InvalidArgument(what + ": it is a directory (ListDir lists it, CopyOut copies it)");
    }
    return std::move(response->body);
  }

  StatusOr<std::vector<FileEntry>> ListDir(const std::string& box_path) override {
    RETURN_IF_ERROR(CheckUsable());
    ASSIGN_OR_RETURN(json j,
                     api_.CallJson("GET", FilesTarget({box_path, std::nullopt, /*list=*/true}), "",
                                   kFilesTimeout, "list dir " + host_files::ShowName(box_path)));
    return api::FileListFromJson(j, box_path);
  }

  Status Remove(const std::string& box_path) override {
    RETURN_IF_ERROR(CheckUsable());
    return api_.CallNoContent("DELETE", FilesTarget({box_path}), "", kFilesTimeout,
                              "remove " + host_files::ShowName(box_path));
  }

  Status Destroy() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (destroyed_) return Status::Ok();
      destroyed_ = true;
    }
    Status st = api_.CallNoContent("DELETE", base_, "", kControlTimeout, "destroy box " + id_);
    // Gone already (its lifetime ended, or the server restarted): destroyed all the same.
    if (st.code() == StatusCode::kNotFound) return Status::Ok();
    return st;
  }

  const BoxInfo& info() const override { return info_; }
  // The box's GET answer holds its log. A server that cannot answer (or a destroyed box)
  // gives an empty one: EgressLog has no error to return, and the log is an audit aid.
  std::vector<EgressRecord> EgressLog() const override {
    auto j = api_.CallJson("GET", base_, "", kControlTimeout, "egress log of box " + id_);
    if (!j.ok()) return {};
    auto log = api::EgressLogFromJson(*j);
    return log.ok() ? std::move(*log) : std::vector<EgressRecord>{};
  }

  StatusOr<ExecResult> InstallPackages(const std::vector<std::string>& packages,
                                       const InstallOptions& options) override {
    RETURN_IF_ERROR(CheckUsable());
    ASSIGN_OR_RETURN(std::string text,
                     DumpJson(api::PackagesRequestToJson({packages, options}), "install packages"));
    ASSIGN_OR_RETURN(
        json j, api_.CallJson("POST", base_ + "/packages", std::move(text),
                              RequestTimeout(options.timeout, kExecMargin), "install packages"));
    return api::ExecResultFromJson(j);
  }

  Status SetNetwork(NetworkMode network, const std::vector<std::string>& allow_hosts) override {
    RETURN_IF_ERROR(CheckUsable());
    ASSIGN_OR_RETURN(std::string text,
                     DumpJson(api::NetworkRequestToJson({network, allow_hosts}), "set network"));
    ASSIGN_OR_RETURN(json j, api_.CallJson("PUT", base_ + "/network", std::move(text),
                                           kControlTimeout, "set network of box " + id_));
    base::JsonFields f(j, "the server's network answer");
    ASSIGN_OR_RETURN(std::string description, f.String("network"));
    info_.network = base::TerminalSafe(description, 1000);
    return Status::Ok();
  }

 private:
  bool IsDestroyed() {
    std::lock_guard<std::mutex> lock(mu_);
    return destroyed_;
  }

  Status CheckUsable() {
    if (IsDestroyed()) return InvalidArgument("the box has been destroyed; create a new box");
    // The server ends the box then; say so as a local box does, not "no such box".
    if (deadline_ && std::chrono::steady_clock::now() >= *deadline_) {
      return DeadlineExceeded("the box's lifetime of " +
                              std::to_string(options_.box_timeout.count() / 1000.0) +
                              " s is over; create a new box");
    }
    return Status::Ok();
  }

  Status CheckExec(const ExecOptions& options) {
    if (options.timeout) RETURN_IF_ERROR(ValidateTimeout(*options.timeout, "exec timeout"));
    if (options.tty) return NotOnServerYet("exec on a terminal (ExecOptions::tty)");
    return CheckUsable();
  }

  std::chrono::milliseconds ExecTimeout(const ExecOptions& options) const {
    return options.timeout.value_or(options_.exec_timeout);
  }

  // The box cannot hold more than its scratch disk.
  uint64_t DiskBytes() const { return std::max<uint64_t>(options_.disk_mib, 1) << 20; }

  std::string FilesTarget(const api::FilesQuery& query) const {
    return base_ + "/files?" + http::EncodeQuery(api::FilesQueryToParams(query));
  }

  const ServerApi api_;
  const BoxOptions options_;
  const std::string id_;
  const std::string base_;  // "/v1/boxes/<id>"
  BoxInfo info_;            // network changes with SetNetwork
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  std::mutex mu_;
  bool destroyed_ = false;
};

}  // namespace

StatusOr<std::unique_ptr<Box::Impl>> CreateRemoteBox(const BoxOptions& options) {
  ASSIGN_OR_RETURN(ServerApi api, ServerApi::Open(options.server, options.server_token));
  ASSIGN_OR_RETURN(std::string body, DumpJson(api::BoxOptionsRequestToJson(options), "create box"));
  auto asked = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(json answer, api.CallJson("POST", "/v1/boxes", std::move(body), kCreateTimeout,
                                             "create box"));
  ASSIGN_OR_RETURN(api::CreatedBox created, api::CreatedBoxFromJson(answer));
  return std::unique_ptr<Box::Impl>(
      std::make_unique<RemoteBox>(std::move(api), options, std::move(created), asked));
}

StatusOr<ExecResult> RunOnServer(const BoxOptions& options, std::string_view code,
                                 const ExecOptions& exec) {
  if (exec.timeout) RETURN_IF_ERROR(ValidateTimeout(*exec.timeout, "exec timeout"));
  if (exec.tty) return NotOnServerYet("exec on a terminal (ExecOptions::tty)");
  ASSIGN_OR_RETURN(ServerApi api, ServerApi::Open(options.server, options.server_token));
  ASSIGN_OR_RETURN(json body, api::RunRequestToJson({std::string(code), exec, options}));
  std::chrono::milliseconds timeout = exec.timeout.value_or(options.exec_timeout);
  // Taking a pool box is instant; starting one on demand is not.
  return SendExec(api, "/v1/run", body, exec,
                  timeout == kNoTimeout ? timeout : timeout + kCreateTimeout, "run");
}

}  // namespace codebox::remote
