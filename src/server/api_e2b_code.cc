// E2B's code interpreter (port 49999): /execute runs a cell in a context and streams its
// output, results and error as newline-delimited JSON; /contexts makes, lists, restarts and
// removes contexts. A python context is a code session of the box (Box::RunCode): the default
// one is the box's own kernel, each made one a named session with a kernel of its own. What
// comes out of the kernel is bounded by the host (the kernel decoder) before it gets here.
#include <mutex>

#include "base/json.h"
#include "base/random.h"
#include "base/text.h"
#include "e2b/code.h"
#include "e2b/sandboxes.h"
#include "server/api_e2b.h"
#include "server/api_request.h"
#include "server/api_stream.h"

namespace codebox::server {
namespace {

using nlohmann::json;

// The default context of python: the box's own kernel.
constexpr std::string_view kDefaultPython = "default-python";

std::string Now() { return e2b::Rfc3339(std::chrono::system_clock::now()); }

// The code interpreter's errors: the SDK reads only the status (404: NotFoundError with the
// body's text; any other: SandboxError).
void RespondText(Call& call, int status, const std::string& text) {
  call.NoteError(Status(status == 404 ? StatusCode::kNotFound : StatusCode::kInvalidArgument, text));
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

struct Context {
  std::string id;
  std::string session;  // Box code session: "" for the default
  std::string cwd;
};

std::optional<Context> FindContext(const E2bSandbox& sandbox, std::string_view id) {
  if (id == kDefaultPython) return Context{std::string(kDefaultPython), "", ""};
  for (const E2bContext& c : sandbox.contexts) {
    if (c.id == id) return Context{c.id, c.id, c.cwd};
  }
  return std::nullopt;
}

Status CheckLanguage(std::string_view language) {
  if (language.empty() || language == "python") return Status::Ok();
  return InvalidArgument("language " + base::Excerpt(language) +
                         " is not supported by codebox's code interpreter yet (python is)");
}

// Python that sets `env` for the cells after it and keeps what it replaced; and the Python that
// puts that back. As E2B's server does, a cell's env_vars last for that cell only.
std::string SetEnvCell(const std::map<std::string, std::string>& env) {
  const std::string literal = json(base::JsonText(json(env))).dump();  // a JSON string is a
                                                                       // Python str literal
  return "import os as _codebox_os, json as _codebox_json\n"
         "_codebox_env = _codebox_json.loads(" + literal + ")\n"
         "_codebox_env_saved = {k: _codebox_os.environ.get(k) for k in _codebox_env}\n"
         "_codebox_os.environ.update(_codebox_env)\n";
}
constexpr std::string_view kRestoreEnvCell =
    "for _codebox_k, _codebox_v in _codebox_env_saved.items():\n"
    "    if _codebox_v is None: _codebox_os.environ.pop(_codebox_k, None)\n"
    "    else: _codebox_os.environ[_codebox_k] = _codebox_v\n";

void Execute(Call& call, Box& box, const E2bSandbox& sandbox) {
  auto body = ParseObject(call.request.body);
  if (!body.ok()) return RespondText(call, 400, body.status().message());
  auto request = e2b::ExecuteRequestFromJson(*body);
  if (!request.ok()) return RespondText(call, 400, request.status().message());
  if (Status st = CheckLanguage(request->language); !st.ok()) {
    return RespondText(call, 400, st.message());
  }
  std::optional<Context> context =
      FindContext(sandbox, request->context_id.empty() ? kDefaultPython : request->context_id);
  if (!context) return RespondText(call, 404, "Context " + base::Excerpt(request->context_id) + " not found");
  LineStream stream(call.exchange);
  if (!stream.Open().ok()) return;
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
  options.on_stdout = [&stream](std::string_view text) { stream.Send(e2b::StdoutLine(text, Now())); };
  options.on_stderr = [&stream](std::string_view text) { stream.Send(e2b::StderrLine(text, Now())); };
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
  if (sandbox.contexts.size() >= kMaxCodeSessions) {
    return RespondText(call, 429, "the sandbox holds " + std::to_string(kMaxCodeSessions) +
                                      " contexts, its most; remove one first");
  }
  const std::string cwd = request->cwd.empty() ? std::string(kE2bHome) : request->cwd;
  E2bContext context{.id = base::HexEncode(base::RandomBytes(8)),
                     .language = request->language,
                     .cwd = cwd};
  // Its kernel starts now, so that a wrong cwd is this call's error and the first cell is quick.
  RunCodeOptions start;
  start.session = context.id;
  start.cwd = cwd;
  auto started = box.RunCode("", start);
  if (!started.ok()) {
    (void)box.EndCodeSession(context.id);
    return RespondText(call, 400, "the context's kernel did not start: " + started.status().message());
  }
  if (!call.context.e2b.AddContext(sandbox.id, context)) {
    (void)box.EndCodeSession(context.id);
    return RespondText(call, 502, "the sandbox is not running any more");
  }
  call.RespondJson(200, e2b::ContextToJson(context.id, context.language, context.cwd));
}

void ListContexts(Call& call, const E2bSandbox& sandbox) {
  json list = json::array({e2b::ContextToJson(kDefaultPython, "python", kE2bHome)});
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
      Status st = box.RestartKernel(context->session);
      // A context whose kernel never ran has nothing to restart.
      if (!st.ok() && st.code() != StatusCode::kNotFound) {
        return RespondText(call, 500, "restarting the context: " + st.message());
      }
      return call.RespondNoContent();
    }
    if (!restart && method == "DELETE") {
      if (context->session.empty()) {
        return RespondText(call, 400, "the default context cannot be removed");
      }
      (void)box.EndCodeSession(context->session);
      call.context.e2b.RemoveContext(sandbox.id, context->id);
      return call.RespondNoContent();
    }
  }
  RespondText(call, 404, "no code interpreter route " + base::Excerpt(method) + " " +
                             base::Excerpt(path));
}

}  // namespace codebox::server
