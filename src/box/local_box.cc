#include "box/local_box.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "agent_client/agent_client.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/text.h"
#include "box/backend.h"
#include "box/copy.h"
#include "box/egress.h"
#include "box/image_run.h"
#include "box/install.h"
#include "box/local_process.h"
#include "codebox/box.h"
#include "host_files/host_files.h"
#include "interpreter/ipython_session.h"
#include "interpreter/warm_python.h"

namespace codebox {

namespace {

// A box path as the file calls take it, relative ones under the box's workdir: `path` as is
// when absolute, else under `workdir`.
std::string ResolveBoxPath(const std::string& workdir, const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  return workdir + "/" + path;
}

// A path the file calls accept: not empty, no NUL (the agent's system calls would cut it);
// `what` names the call in the error.
Status CheckBoxPath(const std::string& path, const char* what) {
  if (path.empty()) {
    return InvalidArgument(std::string(what) + ": the box path is empty (\".\" is the workdir)");
  }
  if (path.find('\0') != std::string::npos) {
    return InvalidArgument(std::string(what) + ": the box path contains a NUL byte");
  }
  return Status::Ok();
}

// `path` under the workdir without "." components and doubled or trailing slashes: the
// directory as ListDir names it in its entries' paths ("." is the workdir itself).
std::string CleanBoxPath(const std::string& workdir, const std::string& path) {
  std::string resolved = ResolveBoxPath(workdir, path), clean;
  size_t start = 0;
  while (start <= resolved.size()) {
    size_t end = std::min(resolved.find('/', start), resolved.size());
    std::string_view part(resolved.data() + start, end - start);
    if (!part.empty() && part != ".") clean.append("/").append(part);
    start = end + 1;
  }
  return clean.empty() ? "/" : clean;
}

// `python3 -c PROGRAM ...`: a program this long is sent as a file instead of an argument.
constexpr size_t kInlineProgramBytes = 64u << 10;

bool IsInlinePython(const std::vector<std::string>& argv) {
  return argv.size() >= 3 && (argv[0] == "python3" || argv[0] == "python") && argv[1] == "-c";
}

// The `-c` argument that runs the program sent as the file `path`: compiled as "<string>" like
// -c, nothing entering its globals, and with `unlink` removed before it runs.
std::string ProgramFromFile(const std::string& path, bool unlink) {
  return std::string("exec((lambda p: (compile(open(p, 'rb').read(), '<string>', 'exec'), ") +
         (unlink ? "__import__('os').unlink(p)" : "") + ")[0])('" + path + "'))";
}

}  // namespace

// A box this process runs itself, through a driver (Box::Create without a server).
class LocalBox final : public Box::Impl {
 public:
  LocalBox(BoxOptions options, std::unique_ptr<box::Backend> backend,
           std::unique_ptr<protocol::AgentClient> agent)
      : options_(std::move(options)),
        backend_(std::move(backend)),
        agent_(std::move(agent)),
        run_(backend_->image_run().value_or(box::RecipeRun(options_))),
        info_(Described(backend_->Info(), options_, run_)) {
    if (options_.box_timeout != kNoTimeout) {
      deadline_ = std::chrono::steady_clock::now() + options_.box_timeout;
      watchdog_ = std::thread([this] { Watchdog(); });
    }
  }

  ~LocalBox() override { (void)Destroy(); }

  StatusOr<ExecResult> Exec(std::vector<std::string> argv, const ExecOptions& options) override {
    const uint64_t mark = NetworkMark();
    ASSIGN_OR_RETURN(std::unique_ptr<Process> process, StartProcess(std::move(argv), options));
    if (options.cancel) options.cancel->Bind([p = process.get()] { (void)p->Kill(); });
    auto result = process->Wait();
    if (options.cancel) options.cancel->Unbind();
    if (result.ok()) result->network_events = NetworkEventsSince(mark);
    return result;
  }

  StatusOr<std::unique_ptr<Process>> Start(std::vector<std::string> argv,
                                           const ExecOptions& options) override {
    return StartProcess(std::move(argv), options, /*keep_stdin=*/true);
  }

  StatusOr<std::unique_ptr<Process>> Attach(int pid, const ExecOptions& options) override {
    RETURN_IF_ERROR(CheckUsable());
    protocol::AttachRequest request;
    request.pid = pid;
    request.output_limit = options_.output_limit_bytes;
    request.on_stdout = options.on_stdout;
    request.on_stderr = options.on_stderr;
    request.keep_output = options.keep_output;
    const std::string what = "attach to process " + std::to_string(pid);
    uint64_t oom_before = backend_->OomKillCount();
    auto running = agent_->Attach(request);
    if (!running.ok()) return Explain(running.status(), what);
    return std::unique_ptr<Process>(std::make_unique<box::LocalProcess>(
        std::move(*running), what, oom_before, ProcessHostFor()));
  }

  StatusOr<std::vector<ProcessInfo>> Processes() override {
    RETURN_IF_ERROR(CheckUsable());
    auto listed = agent_->ListProcesses();
    if (!listed.ok()) return Explain(listed.status(), "list processes");
    std::vector<ProcessInfo> out;
    for (const protocol::msg::ProcessEntry& e : *listed) out.push_back(box::ProcessInfoOf(e));
    return out;
  }

  Status SignalProcess(int pid, int sig, bool tree) override {
    RETURN_IF_ERROR(CheckUsable());
    return Explain(agent_->SignalProcess(pid, sig, tree), "");
  }

  Status SendStdin(int pid, std::string_view data, bool close) override {
    RETURN_IF_ERROR(CheckUsable());
    const std::string what = "stdin of process " + std::to_string(pid);
    // An attacher that wants no output: the stdin frames follow its attach, then it leaves.
    protocol::AttachRequest request;
    request.pid = pid;
    request.output = false;
    auto running = agent_->Attach(request);
    if (!running.ok()) return Explain(running.status(), what);
    Status st = (*running)->WriteStdin(data);
    if (st.ok() && close) st = (*running)->CloseStdin();
    (*running)->Detach();
    auto ended = (*running)->Wait();
    if (!st.ok()) return Explain(st, what);
    // Detached (kFailedPrecondition), or the process ended meanwhile: the data went its way.
    if (ended.ok() || ended.status().code() == StatusCode::kFailedPrecondition) {
      return Status::Ok();
    }
    return Explain(ended.status(), what);
  }

  // Hands the program to the waiting python3 (Prewarm) when one waits and can run it as
  // `python3 -c` would; else, or when it is gone, runs python3 as Exec does. What Exec would
  // refuse goes to Exec, to be refused in its words.
  StatusOr<ExecResult> RunPython(std::string_view code, const ExecOptions& options) override {
    protocol::msg::Exec warm;
    warm.env = ExecEnvironment(options);
    if (code.find('\0') == std::string_view::npos && options.cwd.find('\0') == std::string::npos &&
        (!options.timeout || ValidateTimeout(*options.timeout, "").ok()) &&
        ValidateEnvironment(warm.env).ok() && CheckUsable().ok()) {
      warm.argv = {"python3", "-c", std::string(code)};
      warm.cwd = ExecCwd(options);
      warm.timeout = ExecTimeout(options);
      const uint64_t mark = NetworkMark();
      if (auto result = warm_python_->Run(warm, options)) {
        if (!result->ok()) return Explain(result->status(), "exec python3");
        (*result)->driver = info_.driver;
        (*result)->network_events = NetworkEventsSince(mark);
        return std::move(**result);
      }
    }
    return Exec({"python3", "-c", std::string(code)}, options);
  }

  StatusOr<Execution> RunCode(std::string_view code, const RunCodeOptions& options) override {
    if (options.timeout) RETURN_IF_ERROR(ValidateTimeout(*options.timeout, "run code timeout"));
    RETURN_IF_ERROR(CheckUsable());
    ASSIGN_OR_RETURN(interpreter::KernelSession * session,
                     Session(options.session, options.cwd, /*make=*/true));
    const uint64_t mark = NetworkMark();
    ASSIGN_OR_RETURN(Execution e, session->RunCode(code, options));
    e.driver = info_.driver;
    e.network_events = NetworkEventsSince(mark);
    return e;
  }

  Status RestartKernel(std::string_view name) override {
    RETURN_IF_ERROR(CheckUsable());
    ASSIGN_OR_RETURN(interpreter::KernelSession * session, Session(name, "", /*make=*/false));
    return session->Restart();
  }

  Status EndCodeSession(std::string_view name) override {
    if (name.empty()) return InvalidArgument("the box's own code session cannot be ended");
    std::unique_ptr<interpreter::KernelSession> ended;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = named_sessions_.find(name);
      if (it == named_sessions_.end()) return NotFound("no code session " + std::string(name));
      ended = std::move(it->second);
      named_sessions_.erase(it);
    }
    ended->Close();  // a cell waiting in it now returns; its kernel is killed
    return Status::Ok();
  }

  Status InterruptCode(std::string_view name) override {
    ASSIGN_OR_RETURN(interpreter::KernelSession * session, Session(name, "", /*make=*/false));
    return session->Interrupt();
  }

  Status CopyIn(const std::string& host_path, const std::string& box_path) override {
    RETURN_IF_ERROR(CheckUsable());
    return Explain(box::CopyHostToBox(*agent_, host_path, ResolveBoxPath(run_.workdir, box_path)),
                   "");
  }

  Status CopyOut(const std::string& box_path, const std::string& host_path,
                 const CopyOutOptions& options) override {
    RETURN_IF_ERROR(CheckUsable());
    CopyOutOptions resolved = options;
    // The box cannot have made more than its scratch disk holds.
    if (resolved.max_bytes == 0) {
      resolved.max_bytes = std::max<uint64_t>(options_.disk_mib, 1) << 20;
    }
    std::string from = ResolveBoxPath(run_.workdir, box_path);
    return Explain(box::CopyBoxToHost(*agent_, from, host_path, resolved), "");
  }

  Status WriteFile(const std::string& box_path, std::string_view data, uint32_t mode) override {
    RETURN_IF_ERROR(CheckBoxPath(box_path, "write file"));
    RETURN_IF_ERROR(CheckUsable());
    return Explain(agent_->WriteFile(ResolveBoxPath(run_.workdir, box_path), data, mode), "");
  }

  StatusOr<std::string> ReadFile(const std::string& box_path, uint64_t max_bytes) override {
    RETURN_IF_ERROR(CheckBoxPath(box_path, "read file"));
    RETURN_IF_ERROR(CheckUsable());
    // The box cannot hold a file larger than its scratch disk.
    if (max_bytes == 0) max_bytes = std::max<uint64_t>(options_.disk_mib, 1) << 20;
    auto data = agent_->ReadFile(ResolveBoxPath(run_.workdir, box_path), max_bytes);
    if (!data.ok()) return Explain(data.status(), "");
    return data;
  }

  StatusOr<std::vector<FileEntry>> ListDir(const std::string& box_path) override {
    RETURN_IF_ERROR(CheckBoxPath(box_path, "list dir"));
    RETURN_IF_ERROR(CheckUsable());
    std::string dir = CleanBoxPath(run_.workdir, box_path);
    auto listing = agent_->ListDir(dir);
    if (!listing.ok()) return Explain(listing.status(), "");
    std::vector<FileEntry> entries;
    entries.reserve(listing->size());
    for (protocol::DirEntry& e : *listing) {
      // The names are the box's: one that would make `path` leave `dir` fails the listing,
      // as it fails a copy-out.
      RETURN_IF_ERROR(host_files::CheckNameStaysInDirectory(e.name).WithContext("list dir " + dir));
      std::string path = (dir == "/" ? "" : dir) + "/" + e.name;
      entries.push_back({std::move(e.name), std::move(path), std::move(e.type), e.size, e.mode});
    }
    return entries;
  }

  Status Remove(const std::string& box_path) override {
    RETURN_IF_ERROR(CheckBoxPath(box_path, "remove"));
    RETURN_IF_ERROR(CheckUsable());
    // Not cleaned: "." and ".." stay as given, and the agent refuses them.
    return Explain(agent_->Remove(ResolveBoxPath(run_.workdir, box_path)), "");
  }

  Status Destroy() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (destroyed_) return Status::Ok();
      destroyed_ = true;
    }
    cv_.notify_all();
    session_->Close();  // a cell waiting now returns "destroyed"; the kernel dies with the box
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [name, session] : named_sessions_) session->Close();
    }
    warm_python_->Close();
    if (watchdog_.joinable() && watchdog_.get_id() != std::this_thread::get_id()) watchdog_.join();
    (void)agent_->Shutdown(std::chrono::milliseconds(500));
    // The connection (agent_) lives until ~Impl: execs still running on other threads see it
    // close and return; freeing it here would pull it from under them.
    return backend_->Destroy();
  }

  const BoxInfo& info() const override { return info_; }
  std::vector<EgressRecord> EgressLog() const override {
    return egress_ ? egress_->Log() : std::vector<EgressRecord>{};
  }
  // Where the egress log stands before something runs, and the events after it ran.
  uint64_t NetworkMark() const { return egress_ ? egress_->Recorded() : 0; }
  std::vector<NetworkEvent> NetworkEventsSince(uint64_t mark) const {
    return egress_ ? box::NetworkEventsOf(egress_->LogSince(mark)) : std::vector<NetworkEvent>{};
  }
  StatusOr<BoxUsage> Usage() const override { return backend_->Usage(); }

  // pip in the box, through its proxy, with the index's host allowed while it runs.
  StatusOr<ExecResult> InstallPackages(const std::vector<std::string>& packages,
                                       const InstallOptions& options) override {
    if (!egress_) {
      return FailedPrecondition(
          "install packages: this box has no network; create it with allow_hosts=[...] or "
          "network='allow'");
    }
    ASSIGN_OR_RETURN(box::PipInstall plan, box::PlanPipInstall(packages, options.index_url));
    RETURN_IF_ERROR(ValidateTimeout(options.timeout, "install packages: timeout"));
    auto allowance = egress_->AllowForAWhile(std::move(plan.allow));
    ExecOptions exec;
    exec.timeout = options.timeout;
    // Every host pip reaches is the host's, through the proxy: an index on the host's
    // loopback (allowed for the install) must not be taken for the box's own.
    exec.env = {{"NO_PROXY", ""}, {"no_proxy", ""}};
    return Exec(std::move(plan.argv), exec);
  }

  Status SetNetwork(NetworkMode network, const std::vector<std::string>& allow_hosts) override {
    RETURN_IF_ERROR(CheckUsable().WithContext("set network"));
    if (!egress_) {
      return FailedPrecondition(
          "set network: this box was created without a network, so it has no proxy channel to "
          "open; create it with network='allow' (and no hosts: nothing is reachable until "
          "set_network) to change its network later");
    }
    BoxOptions changed = options_;
    changed.network = network;
    changed.allow_hosts = allow_hosts;
    RETURN_IF_ERROR(changed.Validate().WithContext("set network"));
    // none without hosts closes everything, the secrets' hosts too.
    const bool closed = network == NetworkMode::kNone && allow_hosts.empty();
    net::EgressPolicy policy = net::EgressPolicy::None();
    if (!closed) {
      ASSIGN_OR_RETURN(policy, box::NetworkPolicyOf(changed));
    }
    egress_->SetPolicy(std::move(policy));
    std::lock_guard<std::mutex> lock(mu_);
    info_.network = closed ? "none (closed by set_network; the proxy channel stays)"
                           : box::NetworkDescription(changed);
    return Status::Ok();
  }

  // python3 starts while the kernel does; then both are awaited.
  Status Prewarm(const PrewarmOptions& options) override {
    RETURN_IF_ERROR(CheckUsable().WithContext("prewarm"));
    if (options.python) RETURN_IF_ERROR(warm_python_->Start());
    if (options.kernel) RETURN_IF_ERROR(session_->Start().WithContext("prewarm"));
    if (options.python) RETURN_IF_ERROR(Explain(warm_python_->AwaitReady(), ""));
    return Status::Ok();
  }

  // Before anything runs in the box: the agent listens on the proxy port from the first accept
  // stream on, so no program can take the port first.
  Status StartNetwork(const box::BoxEnv& env) {
    if (EffectiveNetwork(options_) == NetworkMode::kNone) return Status::Ok();
    ASSIGN_OR_RETURN(egress_, box::StartNetwork(*agent_, options_, env.resolver()));
    if (std::string ca = egress_->CaCertificatePem(); !ca.empty()) {
      RETURN_IF_ERROR(box::WriteBoxTrust(*agent_, ca));
    }
    return Status::Ok();
  }

  // The workdir lives on the writable layer; it must exist before the first exec, and be the
  // image user's when the box runs as one.
  Status PrepareWorkdir() {
    // What the host writes into the box is the box user's, as what its programs write is.
    agent_->set_file_owner(run_.user);
    return Explain(agent_->MakeDir(run_.workdir, 0755, run_.user), "make workdir " + run_.workdir);
  }

 private:
  // Exec and Start: the exec's request from the box's plan (environment, user, cwd, timeout
  // capped by the box's lifetime, output limit), started. `keep_stdin`: stdin stays open after
  // options.stdin_data (Start) instead of ending there (Exec).
  StatusOr<std::unique_ptr<Process>> StartProcess(std::vector<std::string> argv,
                                                  const ExecOptions& options,
                                                  bool keep_stdin = false) {
    // A program too long to be an argument (the kernel's limit is 128 KiB) goes as a file.
    std::optional<std::string> program;
    if (IsInlinePython(argv) && argv[2].size() >= kInlineProgramBytes) {
      if (size_t nul = argv[2].find('\0'); nul != std::string::npos) {
        return InvalidArgument("exec: the python3 -c program contains a NUL byte at offset " +
                               std::to_string(nul) + "; Python source cannot hold NUL bytes");
      }
      program = std::move(argv[2]);
      argv[2].clear();
    }
    RETURN_IF_ERROR(ValidateArgv(argv));
    if (options.timeout) RETURN_IF_ERROR(ValidateTimeout(*options.timeout, "exec timeout"));
    RETURN_IF_ERROR(CheckUsable());
    protocol::ExecRequest request;
    protocol::msg::Exec& exec = request.exec;
    exec.argv = std::move(argv);
    ASSIGN_OR_RETURN(exec.user, box::ExecUser(run_, options.user));
    exec.env = ExecEnvironment(options);
    // Root asked for in a box of a user: root's home, unless the exec names one.
    if (run_.user && exec.user != run_.user && !options.env.count("HOME"))
      exec.env["HOME"] = "/root";
    RETURN_IF_ERROR(ValidateEnvironment(exec.env).WithContext("exec"));
    exec.cwd = ExecCwd(options);
    request.stdin_data = options.stdin_data;
    exec.stdin_stream = keep_stdin;
    if (options.tty) {
      exec.tty = protocol::msg::TerminalSize{options.tty->rows, options.tty->cols};
      // A terminal is stdin whatever the request says: an Exec ends its input at once, as
      // /dev/null would.
      if (!keep_stdin) request.stdin_data = options.stdin_data.value_or("");
    }
    exec.timeout = ExecTimeout(options);
    exec.output_limit = options_.output_limit_bytes;
    exec.ring_bytes = options.ring_bytes;
    request.on_stdout = options.on_stdout;
    request.keep_output = options.keep_output;
    request.on_stderr = options.on_stderr;

    // A program sent as a file is removed after the exec's end, which a background process's
    // starter does not wait for.
    if (program && options.background) {
      return InvalidArgument("exec python3: a background python3 -c program is limited to " +
                             std::to_string(kInlineProgramBytes) + " bytes");
    }
    box::ProcessHost host = ProcessHostFor();
    if (program) {
      const std::string path = "/tmp/.codebox-program-" + std::to_string(next_program_++) + ".py";
      // The image's user must read it; it may be root's (a vm's agent writes as root), and a
      // user cannot unlink a root file in sticky /tmp, so the host removes it after the exec.
      const uint32_t mode = run_.user ? 0644 : 0600;
      RETURN_IF_ERROR(Explain(agent_->WriteFile(path, *program, mode), "exec: send program"));
      program.reset();
      exec.argv[2] = ProgramFromFile(path, /*unlink=*/!run_.user);
      if (run_.user) host.after_exit = [this, path] { (void)agent_->Remove(path); };
    }
    const std::string what = "exec " + exec.argv[0];
    uint64_t oom_before = backend_->OomKillCount();
    if (options.background) {
      request.stdin_data.reset();
      auto pid = agent_->StartBackground(request);
      if (!pid.ok()) return Explain(pid.status(), what);
      // Followed as any process of the table is (Attach): its handle detaches when it goes.
      ASSIGN_OR_RETURN(std::unique_ptr<Process> process, Attach(*pid, options));
      if (options.stdin_data) RETURN_IF_ERROR(process->WriteStdin(*options.stdin_data));
      return process;
    }
    auto running = agent_->StartExec(request);
    if (!running.ok()) return Explain(running.status(), what);
    return std::unique_ptr<Process>(std::make_unique<box::LocalProcess>(
        std::move(*running), what, oom_before, std::move(host)));
  }

  // What a LocalProcess of this box needs of it.
  box::ProcessHost ProcessHostFor() {
    box::ProcessHost host;
    host.oom_kill_count = [this] { return backend_->OomKillCount(); };
    host.explain = [this](Status st, const std::string& what) { return Explain(st, what); };
    host.driver = info_.driver;
    return host;
  }

  // What every process in the box starts with (image_run.h: defaults < image < network <
  // BoxOptions::env).
  std::map<std::string, std::string> BaseEnvironment() const {
    return box::BoxEnvironment(options_, run_);
  }

  // An exec's whole environment: the box's, with the exec's own variables over it.
  std::map<std::string, std::string> ExecEnvironment(const ExecOptions& options) const {
    std::map<std::string, std::string> env = BaseEnvironment();
    for (const auto& [k, v] : options.env) env[k] = v;
    return env;
  }

  // An exec's directory: the box's default (the workdir, or the image's WorkingDir), or the
  // one asked for, relative ones under the workdir like every relative box path.
  std::string ExecCwd(const ExecOptions& options) const {
    return options.cwd.empty() ? run_.cwd : ResolveBoxPath(run_.workdir, options.cwd);
  }

  // What is left of the box's lifetime (at least 1 ms), or nullopt for a box without one.
  std::optional<std::chrono::milliseconds> TimeLeft() const {
    if (!deadline_) return std::nullopt;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        *deadline_ - std::chrono::steady_clock::now());
    return std::max(left, std::chrono::milliseconds(1));
  }

  // The timeout an exec is sent with: its own, else the box's default for execs (a background
  // process has its own only), never past the box's end; kNoTimeout for none. A background
  // process with no limit of its own ends with the box.
  std::chrono::milliseconds ExecTimeout(const ExecOptions& options) const {
    std::chrono::milliseconds timeout =
        options.timeout.value_or(options.background ? kNoTimeout : options_.exec_timeout);
    auto left = TimeLeft();
    if (left && (!options.background || timeout != kNoTimeout)) timeout = std::min(timeout, *left);
    return timeout;
  }

  // The session named `name` ("": the box's own), made (its kernel started in `cwd` on its
  // first cell) when `make` and there is room; a named one lives until EndCodeSession or the
  // box's end, so the pointer stays good for a call.
  StatusOr<interpreter::KernelSession*> Session(std::string_view name, const std::string& cwd,
                                                bool make) {
    if (name.empty()) return session_.get();
    if (name.size() > 128) return InvalidArgument("a code session's name is longer than 128 bytes");
    std::lock_guard<std::mutex> lock(mu_);
    if (destroyed_) return InvalidArgument("the box was destroyed");
    auto it = named_sessions_.find(name);
    if (it != named_sessions_.end()) return it->second.get();
    if (!make) return NotFound("no code session " + std::string(name));
    if (named_sessions_.size() >= kMaxCodeSessions) {
      return Status(StatusCode::kResourceExhausted, "the box holds " +
                                                        std::to_string(kMaxCodeSessions) +
                                                        " code sessions, its most; end one first");
    }
    auto made = named_sessions_.emplace(
        std::string(name), MakeSession(cwd.empty() ? run_.cwd : ResolveBoxPath(run_.workdir, cwd)));
    return made.first->second.get();
  }

  std::unique_ptr<interpreter::KernelSession> MakeSession(const std::string& cwd) {
    interpreter::KernelHost host;
    host.agent = agent_.get();
    host.env = BaseEnvironment();
    host.cwd = cwd;
    host.user = run_.user;
    host.image = options_.image;
    host.output_limit = options_.output_limit_bytes;
    host.memory_mib = options_.memory_mib;
    host.default_timeout = options_.exec_timeout;
    host.oom_kill_count = [this] { return backend_->OomKillCount(); };
    host.time_left = [this] { return TimeLeft(); };
    host.explain = [this](Status st, const std::string& what) { return Explain(st, what); };
    return std::make_unique<interpreter::KernelSession>(std::move(host));
  }

  std::unique_ptr<interpreter::WarmPython> MakeWarmPython() {
    interpreter::WarmHost host;
    host.agent = agent_.get();
    host.env = BaseEnvironment();
    host.workdir = run_.cwd;
    host.user = run_.user;
    host.image = options_.image;
    host.output_limit = options_.output_limit_bytes;
    host.oom_kill_count = [this] { return backend_->OomKillCount(); };
    host.time_left = [this] { return TimeLeft(); };
    return std::make_unique<interpreter::WarmPython>(std::move(host));
  }

  Status CheckUsable() {
    std::lock_guard<std::mutex> lock(mu_);
    if (expired_) {
      return DeadlineExceeded("the box's lifetime of " +
                              std::to_string(options_.box_timeout.count() / 1000.0) +
                              " s is over; create a new box");
    }
    if (destroyed_) return InvalidArgument("the box has been destroyed; create a new box");
    return Status::Ok();
  }

  // Adds what the driver knows when the box itself failed.
  Status Explain(Status st, const std::string& what) {
    if (st.ok()) return st;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (destroyed_ || expired_) {  // not a crash: we ended it
        return Status(expired_ ? StatusCode::kDeadlineExceeded : StatusCode::kInvalidArgument,
                      (what.empty() ? "" : what + ": ") +
                          (expired_ ? "the box's lifetime ended while this ran"
                                    : "the box was destroyed while this ran"));
      }
    }
    if (!what.empty()) st = st.WithContext(what);
    if (st.code() == StatusCode::kBoxCrashed) {
      // The guest console and the agent's log are box-controlled text.
      std::string diag = base::TerminalSafe(backend_->Diagnostics());
      if (!diag.empty()) st = Status(st.code(), st.message() + "\n" + diag);
    }
    return st;
  }

  void Watchdog() {
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_until(lock, *deadline_, [this] { return destroyed_; })) return;
    expired_ = true;
    lock.unlock();
    CODEBOX_LOG(kInfo, "box lifetime over; destroying it");
    // Kill everything in the box now; Destroy() later finishes the teardown.
    (void)backend_->Destroy();
  }

  static BoxInfo Described(BoxInfo info, const BoxOptions& options, const box::ImageRun& run) {
    info.network = box::NetworkDescription(options);
    info.user = run.user_text;
    return info;
  }

  const BoxOptions options_;
  std::unique_ptr<box::Backend> backend_;
  std::unique_ptr<protocol::AgentClient> agent_;
  const box::ImageRun run_;  // how the image's processes run: workdir, cwd, env, user
  // Set before the box is handed out; destroyed before the agent connection its threads use.
  std::unique_ptr<box::EgressService> egress_;
  BoxInfo info_;  // network changes with SetNetwork
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool destroyed_ = false;
  bool expired_ = false;
  std::thread watchdog_;
  std::atomic<uint64_t> next_program_{0};
  // Destroyed before the agent connection its execs use.
  std::unique_ptr<interpreter::WarmPython> warm_python_ = MakeWarmPython();
  // Last: destroyed first, while the agent connection it uses still exists.
  std::unique_ptr<interpreter::KernelSession> session_ = MakeSession(run_.cwd);
  // RunCodeOptions::session's kernels, by name (under mu_); each closed before the box ends.
  std::map<std::string, std::unique_ptr<interpreter::KernelSession>, std::less<>> named_sessions_;
};

namespace box {

StatusOr<std::unique_ptr<Box>> MakeLocalBox(const BoxOptions& options,
                                            std::unique_ptr<Backend> backend,
                                            std::unique_ptr<protocol::AgentClient> agent,
                                            BoxEnv& env) {
  agent->set_idle_timeout(env.agent_idle_timeout());
  auto impl = std::make_unique<LocalBox>(options, std::move(backend), std::move(agent));
  RETURN_IF_ERROR(impl->StartNetwork(env).WithContext("create box"));
  RETURN_IF_ERROR(impl->PrepareWorkdir().WithContext("create box"));
  return Box::Impl::Wrap(std::move(impl));
}

}  // namespace box

}  // namespace codebox
