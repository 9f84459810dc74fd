#include "e2b/code.h"

#include <utility>

#include "base/json.h"
#include "base/json_fields.h"
#include "base/text.h"
#include "e2b/sandboxes.h"

namespace codebox::e2b {
namespace {

using nlohmann::json;

std::string Line(const json& j) { return base::JsonText(j) + "\n"; }

// E2B's names for the MIME types a result may carry.
constexpr std::pair<std::string_view, const char*> kFormats[] = {
    {"text/plain", "text"},        {"text/html", "html"},
    {"text/markdown", "markdown"}, {"image/svg+xml", "svg"},
    {"image/png", "png"},          {"image/jpeg", "jpeg"},
    {"application/pdf", "pdf"},    {"text/latex", "latex"},
    {"application/json", "json"},  {"application/javascript", "javascript"},
    {kChartMime, "chart"},
};

}  // namespace

std::string NormalizeLanguage(std::string_view language) {
  std::string out = base::AsciiLower(language);
  while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
  while (!out.empty() && (out.front() == ' ' || out.front() == '\t')) out.erase(out.begin());
  if (out == "js") return "javascript";
  if (out == "ts") return "typescript";
  return out;
}

StatusOr<ExecuteRequest> ExecuteRequestFromJson(const json& body) {
  if (!body.is_object()) return InvalidArgument("the execute request is not a JSON object");
  base::JsonFields f(body, "execute request", StatusCode::kInvalidArgument);
  ExecuteRequest out;
  ASSIGN_OR_RETURN(out.code, f.String("code"));
  if (out.code.size() > kMaxCodeBytes) {
    return f.Fault("code", "is longer than " + std::to_string(kMaxCodeBytes) + " bytes");
  }
  ASSIGN_OR_RETURN(out.context_id, f.String("context_id", std::string()));
  if (out.context_id.size() > kMaxContextIdBytes) return f.Fault("context_id", "is too long");
  ASSIGN_OR_RETURN(std::string language, f.String("language", std::string()));
  if (language.size() > 64) return f.Fault("language", "is too long");
  out.language = NormalizeLanguage(language);
  if (!out.context_id.empty() && !out.language.empty()) {
    return InvalidArgument("give a context_id or a language, not both");
  }
  if (const json* env = f.Find("env_vars"); env != nullptr) {
    if (!env->is_object() || env->size() > kMaxMapEntries) {
      return f.Fault("env_vars",
                     "is not an object of at most " + std::to_string(kMaxMapEntries) + " strings");
    }
    for (const auto& [k, v] : env->items()) {
      if (!v.is_string() || k.empty() || k.size() > kMaxKeyBytes ||
          v.get_ref<const std::string&>().size() > kMaxValueBytes) {
        return f.Fault("env_vars", "has an entry that is not a short string");
      }
      out.env_vars.emplace(k, v.get<std::string>());
    }
  }
  return out;
}

StatusOr<ContextRequest> ContextRequestFromJson(const json& body) {
  if (!body.is_object()) return InvalidArgument("the context request is not a JSON object");
  base::JsonFields f(body, "context request", StatusCode::kInvalidArgument);
  ContextRequest out;
  ASSIGN_OR_RETURN(std::string language, f.String("language", std::string("python")));
  if (language.size() > 64) return f.Fault("language", "is too long");
  out.language = NormalizeLanguage(language);
  if (out.language.empty()) out.language = "python";
  ASSIGN_OR_RETURN(out.cwd, f.String("cwd", std::string()));
  if (out.cwd.size() > 4096 || out.cwd.find('\0') != std::string::npos) {
    return f.Fault("cwd", "is longer than 4096 bytes or holds a NUL");
  }
  return out;
}

json ContextToJson(std::string_view id, std::string_view language, std::string_view cwd) {
  return {{"id", std::string(id)}, {"language", std::string(language)}, {"cwd", std::string(cwd)}};
}

std::string StdoutLine(std::string_view text, std::string_view timestamp) {
  return Line(
      {{"type", "stdout"}, {"text", std::string(text)}, {"timestamp", std::string(timestamp)}});
}

std::string StderrLine(std::string_view text, std::string_view timestamp) {
  return Line(
      {{"type", "stderr"}, {"text", std::string(text)}, {"timestamp", std::string(timestamp)}});
}

std::string ResultLine(const CellResult& result) {
  json line = {{"type", "result"}, {"is_main_result", result.is_main_result}};
  for (const auto& [mime, name] : kFormats) {
    const std::string* value = result.Get(mime);
    if (value == nullptr) continue;
    if (mime == "application/json" || mime == kChartMime) {
      // The kernel's JSON text (checked by the host when it arrived); an object on the wire.
      json parsed = base::ParseJsonOrDiscarded(*value);
      if (!parsed.is_discarded()) line[name] = std::move(parsed);
    } else if (mime == "text/plain" && value->size() >= 2 && value->front() == '\'' &&
               value->back() == '\'') {
      line[name] = value->substr(1, value->size() - 2);  // a str's repr, as E2B's server gives it
    } else {
      line[name] = *value;
    }
  }
  return Line(line);
}

std::string ErrorLine(const CellError& error) {
  return Line({{"type", "error"},
               {"name", error.name},
               {"value", error.value},
               {"traceback", error.traceback}});
}

std::string ExecutionCountLine(int64_t count) {
  return Line({{"type", "number_of_executions"}, {"execution_count", count}});
}

std::string EndOfExecutionLine() { return Line({{"type", "end_of_execution"}}); }

}  // namespace codebox::e2b
