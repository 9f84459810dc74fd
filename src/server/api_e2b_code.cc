// E2B's code interpreter (port 49999): /execute runs a cell in a context and streams its
// output, results and error as newline-delimited JSON; /contexts makes, lists, restarts and
// removes contexts. A python context is a code session of the box (Box::RunCode): the default
// one is the box's own kernel, each made one a named session with a kernel of its own. What
// comes out of the kernel is bounded by the host (the kernel decoder) before it gets here.
#include <mutex>

#include "base/json.h"
#include "base/random.h"
#include "base/text.h"
#include "base/utc_time.h"
#include "e2b/code.h"
#include "e2b/sandboxes.h"
#include "server/api_e2b.h"
#include "server/api_request.h"
#include "server/api_stream.h"

namespace codebox::server {
namespace {

using nlohmann::json;

std::string Now() { return base::Rfc3339(std::chrono::system_clock::now()); }

// The code interpreter's errors: the SDK reads only the status (404: NotFoundError with the
// body's text; any other: SandboxError).
void RespondText(Call& call, int status, const std::string& text) {
  call.NoteError(
      Status(status == 404 ? StatusCode::kNotFound : StatusCode::kInvalidArgument, text));
  http::Response response;
  response.status = status;
  response.content_type = "text/plain; charset=utf-8";
  response.body = text;
  (void)call.exchange.Respond(std::move(response));
}

// The lines of one execution, written whole (the SDK parses each line it receives, and
// decodes each chunk on its own). Called from the kernel's thread and the handler's; the first
// failed write makes the rest no-ops.
class LineStream {
 public:
  explicit LineStream(http::Exchange& exchange) : exchange_(exchange) {}
  Status Open() {
    Status st = exchange_.BeginStream(200, "application/x-ndjson");
    if (!st.ok()) failed_ = true;
    return st;
  }
  void Send(const std::string& line) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_) return;
    if (!exchange_.SendChunk(line).ok()) failed_ = true;
  }
  bool failed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_;
  }

 private:
  http::Exchange& exchange_;
  mutable std::mutex mu_;
  bool failed_ = false;
};

// A context as a cell runs in it: python in a code session of the box ("" the box's own);
// bash in a shell whose state the box keeps between cells (BashCell).
struct Context {
  std::string id;
  std::string language;
  std::string session;
  std::string cwd;
};

// The default context of each language, made on its first use; others are made by POST
// /contexts.
std::string DefaultContextId(std::string_view language) {
  return "default-" + std::string(language);
}

std::optional<Context> FindContext(const E2bSandbox& sandbox, std::string_view id) {
  for (std::string_view language : {"python", "bash"}) {
    if (id == DefaultContextId(language))
      return Context{std::string(id), std::string(language), "", ""};
  }
  for (const E2bContext& c : sandbox.contexts) {
    if (c.id == id) return Context{c.id, c.language, c.id, c.cwd};
  }
  return std::nullopt;
}

Status CheckLanguage(std::string_view language) {
  if (language.empty() || language == "python" || language == "bash") return Status::Ok();
  return InvalidArgument("language " + base::Excerpt(language) +
                         " is not supported by codebox's code interpreter (python and bash are)");
}

// A bash cell: the code runs in a fresh bash that first takes the context's state (its cwd,
// variables and functions, kept in the box under /tmp) and leaves it there at its end, so that
// state lasts from cell to cell as in one shell. $1 is the code, $2 the context's starting
// cwd, $3 its id (hex or default-bash: no quoting needed), $4 the cell's env_vars as export
// lines and $5 their names: set after the state is taken, and put back as they were before it
// is left, so that they last for this cell only.
constexpr std::string_view kBashCell = R"sh(__codebox_state=/tmp/.codebox-e2b-bash/$3
mkdir -p "$__codebox_state" 2>/dev/null
cd "$(cat "$__codebox_state/cwd" 2>/dev/null || printf %s "$2")" 2>/dev/null
[ -f "$__codebox_state/vars" ] && . "$__codebox_state/vars" 2>/dev/null
[ -f "$__codebox_state/funcs" ] && . "$__codebox_state/funcs" 2>/dev/null
__codebox_names=$5
__codebox_prior=$([ -n "$5" ] && declare -p $5 2>/dev/null)
eval "$4"
__codebox_save() {
  __codebox_rc=$?
  unset -f __codebox_save
  [ -n "$__codebox_names" ] && unset $__codebox_names
  eval "$__codebox_prior"
  pwd > "$__codebox_state/cwd"
  declare -p | grep -Ev '^declare -[a-zA-Z-]*r|^declare -[a-zA-Z-]* (BASH[A-Z_]*|EUID|PPID|SHELLOPTS|UID|GROUPS|FUNCNAME|PIPESTATUS|_|SHLVL|RANDOM|SRANDOM|SECONDS|LINENO|HISTCMD|EPOCHSECONDS|EPOCHREALTIME|OPTIND|OPTERR|PWD|OLDPWD|DIRSTACK|COMP_WORDBREAKS|__codebox_[a-z]*)=' > "$__codebox_state/vars"
  declare -f > "$__codebox_state/funcs"
  exit $__codebox_rc
}
trap __codebox_save EXIT
eval "$1"
)sh";

// Python that sets `env` for the cells after it and keeps what it replaced; and the Python that
// puts that back. As E2B's server does, a cell's env_vars last for that cell only.
std::string SetEnvCell(const std::map<std::string, std::string>& env) {
  // A JSON string is a Python str literal.
  const std::string literal = base::JsonText(json(base::JsonText(json(env))));
  return "import os as _codebox_os, json as _codebox_json\n"
         "_codebox_env = _codebox_json.loads(" +
         literal +
         ")\n"
         "_codebox_env_saved = {k: _codebox_os.environ.get(k) for k in _codebox_env}\n"
         "_codebox_os.environ.update(_codebox_env)\n";
}
constexpr std::string_view kRestoreEnvCell =
    "for _codebox_k, _codebox_v in _codebox_env_saved.items():\n"
    "    if _codebox_v is None: _codebox_os.environ.pop(_codebox_k, None)\n"
    "    else: _codebox_os.environ[_codebox_k] = _codebox_v\n";

void BashCell(Call& call, Box& box, const Context& context, const e2b::ExecuteRequest& request,
              LineStream& stream) {
  // The cell's env_vars as bash export lines, each value in single quotes.
  std::string exports, names;
  for (const auto& [name, value] : request.env_vars) {
    if (name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") !=
            std::string::npos ||
        (name[0] >= '0' && name[0] <= '9')) {
      stream.Send(e2b::ErrorLine(
          {.name = "BashError",
           .value = "env_vars name " + base::Excerpt(name) + " is not a shell variable's name",
           .traceback = ""}));
      return stream.Send(e2b::EndOfExecutionLine());
    }
    std::string quoted = "'";
    for (char c : value) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    exports += "export " + name + "=" + quoted + "'\n";
    names += (names.empty() ? "" : " ") + name;
  }
  ExecOptions options;
  options.keep_output = false;
  options.timeout = call.context.options.ceilings.exec_timeout;
  options.cancel = std::make_shared<ExecCancel>();
  options.on_stdout = [&stream](std::string_view text) {
    stream.Send(e2b::StdoutLine(text, Now()));
  };
  options.on_stderr = [&stream](std::string_view text) {
    stream.Send(e2b::StderrLine(text, Now()));
  };
  const std::string cwd = context.cwd.empty() ? std::string(kE2bHome) : context.cwd;
  StatusOr<ExecResult> result = [&] {
    // A client that goes away ends the cell (its state stays as the last cell left it).
    DisconnectWatch watch(call.exchange, nullptr, [&options] { options.cancel->Cancel(); });
    return box.Exec({"bash", "-c", std::string(kBashCell), "bash", request.code, cwd, context.id,
                     exports, names},
                    options);
  }();
  if (!result.ok()) {
    call.NoteError(result.status());
    stream.Send(e2b::ErrorLine(
        {.name = "UnexpectedEndOfExecution", .value = result.status().message(), .traceback = ""}));
  } else if (!result->ok()) {
    const std::string why = result->timed_out ? "the cell passed its timeout"
                            : result->signal != 0
                                ? "killed by signal " + std::to_string(result->signal)
                                : "exit status " + std::to_string(result->exit_code);
    stream.Send(e2b::ErrorLine({.name = "BashError", .value = why, .traceback = ""}));
  }
  stream.Send(e2b::EndOfExecutionLine());
}

void Execute(Call& call, Box& box, const E2bSandbox& sandbox) {
  auto body = ParseObject(call.request.body);
  if (!body.ok()) return RespondText(call, 400, body.status().message());
  auto request = e2b::ExecuteRequestFromJson(*body);
  if (!request.ok()) return RespondText(call, 400, request.status().message());
  if (Status st = CheckLanguage(request->language); !st.ok()) {
    return RespondText(call, 400, st.message());
  }
  const std::string language = request->language.empty() ? "python" : request->language;
  std::optional<Context> context = FindContext(
      sandbox, request->context_id.empty() ? DefaultContextId(language) : request->context_id);
  if (!context) {
    return RespondText(call, 404, "Context " + base::Excerpt(request->context_id) + " not found");
  }
  LineStream stream(call.exchange);
  if (!stream.Open().ok()) return;
  if (context->language == "bash") return BashCell(call, box, *context, *request, stream);
  RunCodeOptions options;
  options.session = context->session;
  options.cwd = context->cwd;
  // The client bounds its wait and goes away past it (then the cell is interrupted, below);
  // the server's ceiling bounds the rest.
  options.timeout = call.context.options.ceilings.exec_timeout;
  if (!request->env_vars.empty()) {
    RunCodeOptions quiet = options;
    auto set = box.RunCode(SetEnvCell(request->env_vars), quiet);
    if (!set.ok() || set->error) {
      stream.Send(e2b::ErrorLine({.name = "EnvironmentError",
                                  .value = "the cell's env_vars could not be set",
                                  .traceback = ""}));
      return stream.Send(e2b::EndOfExecutionLine());
    }
  }
  options.on_stdout = [&stream](std::string_view text) {
    stream.Send(e2b::StdoutLine(text, Now()));
  };
  options.on_stderr = [&stream](std::string_view text) {
    stream.Send(e2b::StderrLine(text, Now()));
  };
  options.on_result = [&stream](const CellResult& r) { stream.Send(e2b::ResultLine(r)); };
  StatusOr<Execution> execution = [&] {
    DisconnectWatch watch(call.exchange, nullptr,
                          [&box, &context] { (void)box.InterruptCode(context->session); });
    return box.RunCode(request->code, options);
  }();
  if (!request->env_vars.empty()) {
    RunCodeOptions quiet;
    quiet.session = options.session;
    (void)box.RunCode(kRestoreEnvCell, quiet);
  }
  if (!execution.ok()) {
    call.NoteError(execution.status());
    stream.Send(e2b::ErrorLine({.name = "UnexpectedEndOfExecution",
                                .value = execution.status().message(),
                                .traceback = ""}));
    return stream.Send(e2b::EndOfExecutionLine());
  }
  stream.Send(e2b::ExecutionCountLine(execution->execution_count));
  if (execution->error) stream.Send(e2b::ErrorLine(*execution->error));
  stream.Send(e2b::EndOfExecutionLine());
}

void CreateContext(Call& call, Box& box, const E2bSandbox& sandbox) {
  auto body = ParseObject(call.request.body);
  if (!body.ok()) return RespondText(call, 400, body.status().message());
  auto request = e2b::ContextRequestFromJson(*body);
  if (!request.ok()) return RespondText(call, 400, request.status().message());
  if (Status st = CheckLanguage(request->language); !st.ok()) {
    return RespondText(call, 400, st.message());
  }
  const std::string cwd = request->cwd.empty() ? std::string(kE2bHome) : request->cwd;
  E2bContext context{
      .id = base::HexEncode(base::RandomBytes(8)), .language = request->language, .cwd = cwd};
  // Its place first: the bound holds however many requests race for the last one.
  if (Status st = call.context.e2b.AddContext(sandbox.id, context, kMaxCodeSessions); !st.ok()) {
    return RespondText(call, st.code() == StatusCode::kResourceExhausted ? 429 : 502, st.message());
  }
  if (context.language == "python") {
    // Its kernel starts now, so that a wrong cwd is this call's error and the first cell is
    // quick.
    RunCodeOptions start;
    start.session = context.id;
    start.cwd = cwd;
    auto started = box.RunCode("", start);
    if (!started.ok()) {
      (void)box.EndCodeSession(context.id);
      call.context.e2b.RemoveContext(sandbox.id, context.id);
      return RespondText(call, 400,
                         "the context's kernel did not start: " + started.status().message());
    }
  }
  call.RespondJson(200, e2b::ContextToJson(context.id, context.language, context.cwd));
}

void ListContexts(Call& call, const E2bSandbox& sandbox) {
  json list = json::array({e2b::ContextToJson(DefaultContextId("python"), "python", kE2bHome),
                           e2b::ContextToJson(DefaultContextId("bash"), "bash", kE2bHome)});
  for (const E2bContext& c : sandbox.contexts) {
    list.push_back(e2b::ContextToJson(c.id, c.language, c.cwd));
  }
  call.RespondJson(200, list);
}

}  // namespace

void CodeInterpreter(Call& call, Box& box, const E2bSandbox& sandbox) {
  const std::string& path = call.request.path;
  const std::string& method = call.request.method;
  if (path == "/execute" && method == "POST") return Execute(call, box, sandbox);
  if (path == "/contexts" && method == "POST") return CreateContext(call, box, sandbox);
  if (path == "/contexts" && method == "GET") return ListContexts(call, sandbox);
  if (path == "/health" && method == "GET") return RespondText(call, 200, "OK");
  constexpr std::string_view kContexts = "/contexts/";
  if (path.starts_with(kContexts)) {
    std::string_view rest = std::string_view(path).substr(kContexts.size());
    const bool restart = rest.ends_with("/restart");
    if (restart) rest.remove_suffix(std::string_view("/restart").size());
    std::optional<Context> context = FindContext(sandbox, rest);
    if (!context) return RespondText(call, 404, "Context " + base::Excerpt(rest) + " not found");
    if (restart && method == "POST") {
      if (context->language == "bash") {
        // A fresh shell: the state the cells left goes.
        (void)box.Exec({"rm", "-rf", "--", "/tmp/.codebox-e2b-bash/" + context->id});
        return call.RespondNoContent();
      }
      Status st = box.RestartKernel(context->session);
      // A context whose kernel never ran has nothing to restart.
      if (!st.ok() && st.code() != StatusCode::kNotFound) {
        return RespondText(call, 500, "restarting the context: " + st.message());
      }
      return call.RespondNoContent();
    }
    if (!restart && method == "DELETE") {
      if (context->id.starts_with("default-")) {
        return RespondText(call, 400, "a default context cannot be removed");
      }
      if (context->language == "bash") {
        (void)box.Exec({"rm", "-rf", "--", "/tmp/.codebox-e2b-bash/" + context->id});
      } else {
        (void)box.EndCodeSession(context->session);
      }
      call.context.e2b.RemoveContext(sandbox.id, context->id);
      return call.RespondNoContent();
    }
  }
  RespondText(call, 404,
              "no code interpreter route " + base::Excerpt(method) + " " + base::Excerpt(path));
}

}  // namespace codebox::server
