#include "llm/model_reply.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "base/json.h"
#include "llm/fence.h"
#include "llm/tools.h"

namespace codebox::llm {
namespace {

using nlohmann::json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistral = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kMistralCallId = "[CALL_ID]";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::array<std::string_view, 3> kLlamaEnds = {"<|eom_id|>", "<|eot_id|>", "<|end_of_text|>"};

struct ThinkTags {
  std::string_view open, close;
};
constexpr std::array<ThinkTags, 2> kThinkTags = {{{"<think>", "</think>"}, {"[THINK]", "[/THINK]"}}};

// Where text stops being words a person should see as they stream: a call written into the
// content, or a code fence (which may be run instead of shown).
constexpr std::array<std::string_view, 4> kHoldMarkers = {kHermesOpen, kMistral, kPythonTag, "```"};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s;
}

// The length of the JSON object or array `text` starts with (strings skipped), or 0 when it
// does not start with one or never closes it.
size_t JsonValueLength(std::string_view text) {
  if (text.empty() || (text.front() != '{' && text.front() != '[')) return 0;
  int depth = 0;
  base::JsonStringScanner strings;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (strings.InString(c)) continue;
    if (c == '{' || c == '[') ++depth;
    else if ((c == '}' || c == ']') && --depth == 0) return i + 1;
  }
  return 0;
}

// "```json\n...\n```" as the whole text: its body. Otherwise the text itself.
std::string_view Unfence(std::string_view text) {
  text = Trim(text);
  if (text.substr(0, 3) != "```" || text.size() < 6 || text.substr(text.size() - 3) != "```") return text;
  size_t body = text.find('\n');
  if (body == std::string_view::npos) return text;
  return Trim(text.substr(body + 1, text.size() - 3 - (body + 1)));
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// One call from its JSON: {"name", "arguments"|"parameters", "id"?} or OpenAI's
// {"id"?, "function": {"name", "arguments"}}. Arguments become JSON text; absent ones "{}".
bool CallFromJson(const json& j, ToolCall* call, std::string* why) {
  if (!j.is_object()) {
    *why = "a tool call must be a JSON object with \"name\" and \"arguments\", got " + base::JsonExcerpt(j);
    return false;
  }
  const json* fields = &j;
  if (auto f = j.find("function"); f != j.end() && f->is_object()) fields = &*f;
  auto name = fields->find("name");
  if (name == fields->end() || !name->is_string() || Trim(name->get_ref<const std::string&>()).empty()) {
    *why = "the tool call " + base::JsonExcerpt(j) + " has no \"name\"";
    return false;
  }
  call->name = std::string(Trim(name->get_ref<const std::string&>()));
  if (auto id = j.find("id"); id != j.end() && id->is_string()) call->id = id->get<std::string>();
  auto args = fields->find("arguments");
  if (args == fields->end()) args = fields->find("parameters");
  if (args == fields->end() || args->is_null()) call->arguments = "{}";
  else call->arguments = args->is_string() ? args->get<std::string>() : Dump(*args);
  return true;
}

// Calls from a JSON text that should hold one call or a list of them. `what` names the shape
// for the model when it cannot be read.
void AddCallsFromText(std::string_view text, std::string_view what, ModelTurn* turn) {
  text = Unfence(text);
  json j = ParseModelJson(text);
  if (j.is_discarded()) {
    turn->unreadable.push_back("the " + std::string(what) + " call is not valid JSON (" +
                               base::Excerpt(text, 120) + ")");
    return;
  }
  const bool list = j.is_array();
  if (list && j.empty()) {
    turn->unreadable.push_back("the " + std::string(what) + " call list is empty");
    return;
  }
  for (const json& item : list ? j : json::array({j})) {
    ToolCall call;
    std::string why;
    if (CallFromJson(item, &call, &why)) turn->calls.push_back(std::move(call));
    else turn->unreadable.push_back(why);
  }
}

// Removes the thinking blocks of `content` into turn->thinking and returns the rest. A close
// tag with no open one ends thinking that the server's template opened; an open tag never
// closed runs to the end (a reply cut short while thinking).
std::string SplitThinking(std::string_view content, std::string* thinking) {
  auto add_thinking = [&](std::string_view t) {
    t = Trim(t);
    if (t.empty()) return;
    if (!thinking->empty()) thinking->append("\n");
    thinking->append(t);
  };
  for (const ThinkTags& tags : kThinkTags) {
    size_t close = content.find(tags.close);
    size_t open = content.find(tags.open);
    if (close != std::string_view::npos && (open == std::string_view::npos || close < open)) {
      add_thinking(content.substr(0, close));
      content.remove_prefix(close + tags.close.size());
    }
  }
  std::string rest;
  while (!content.empty()) {
    size_t open = std::string_view::npos;
    const ThinkTags* found = nullptr;
    for (const ThinkTags& tags : kThinkTags) {
      size_t at = content.find(tags.open);
      if (at < open) open = at, found = &tags;
    }
    if (found == nullptr) {
      rest.append(rest.empty() ? content : TrimLeft(content));
      break;
    }
    rest.append(content.substr(0, open));
    content.remove_prefix(open + found->open.size());
    size_t close = content.find(found->close);
    add_thinking(content.substr(0, close));
    if (close == std::string_view::npos) break;
    content.remove_prefix(close + found->close.size());
    content = TrimLeft(content);
  }
  return std::string(Trim(rest));
}

// Hermes / Qwen: <tool_call>JSON</tool_call>, as often as there are calls; the last may be
// left open by a reply cut short.
bool ReadHermes(std::string_view text, ModelTurn* turn) {
  size_t at = text.find(kHermesOpen);
  if (at == std::string_view::npos) return false;
  std::string outside(text.substr(0, at));
  while (at != std::string_view::npos) {
    size_t body = at + kHermesOpen.size();
    size_t close = text.find(kHermesClose, body);
    size_t next = text.find(kHermesOpen, body);
    size_t end = std::min({close, next, text.size()});
    AddCallsFromText(text.substr(body, end - body), "<tool_call>", turn);
    size_t after = end == close ? close + kHermesClose.size() : end;
    at = text.find(kHermesOpen, after);
    outside.append(text.substr(after, std::min(at, text.size()) - after));
  }
  turn->text = std::string(Trim(outside));
  turn->shape = "<tool_call>";
  return true;
}

// Mistral: [TOOL_CALLS][{"name": .., "arguments": ..}, ..], or, in its newer templates,
// [TOOL_CALLS]name[ARGS]{..} (with [CALL_ID]id before [ARGS] in some), repeated per call.
bool ReadMistral(std::string_view text, ModelTurn* turn) {
  size_t at = text.find(kMistral);
  if (at == std::string_view::npos) return false;
  turn->text = std::string(Trim(text.substr(0, at)));
  turn->shape = "[TOOL_CALLS]";
  std::string_view rest = text.substr(at);
  while (rest.substr(0, kMistral.size()) == kMistral) {
    rest = TrimLeft(rest.substr(kMistral.size()));
    size_t next = rest.find(kMistral);
    std::string_view segment = rest.substr(0, next);
    rest = next == std::string_view::npos ? std::string_view() : rest.substr(next);
    if (!segment.empty() && (segment.front() == '[' || segment.front() == '{')) {
      size_t length = JsonValueLength(segment);
      AddCallsFromText(length > 0 ? segment.substr(0, length) : segment, "[TOOL_CALLS]", turn);
      continue;
    }
    size_t args = segment.find(kMistralArgs);
    if (args == std::string_view::npos) {
      turn->unreadable.push_back("the [TOOL_CALLS] call has no JSON list and no [ARGS] (" +
                                 base::Excerpt(segment, 120) + ")");
      continue;
    }
    ToolCall call;
    std::string_view head = segment.substr(0, args);
    size_t id = head.find(kMistralCallId);
    if (id != std::string_view::npos) {
      call.id = std::string(Trim(head.substr(id + kMistralCallId.size())));
      head = head.substr(0, id);
    }
    call.name = std::string(Trim(head));
    std::string_view arguments = TrimLeft(segment.substr(args + kMistralArgs.size()));
    if (size_t length = JsonValueLength(arguments); length > 0) arguments = arguments.substr(0, length);
    json parsed = ParseModelJson(Trim(arguments));
    if (call.name.empty() || parsed.is_discarded()) {
      turn->unreadable.push_back("the [TOOL_CALLS] call " + base::Excerpt(segment, 120) +
                                 " has no name or its [ARGS] are not valid JSON");
      continue;
    }
    call.arguments = Dump(parsed);
    turn->calls.push_back(std::move(call));
  }
  return true;
}

// Llama 3.x: <|python_tag|> then a JSON call (several may be separated by ';'), or Python
// source for the model's built-in code interpreter, which is what run_python is.
bool ReadPythonTag(std::string_view text, ModelTurn* turn) {
  size_t at = text.find(kPythonTag);
  if (at == std::string_view::npos) return false;
  turn->text = std::string(Trim(text.substr(0, at)));
  turn->shape = std::string(kPythonTag);
  std::string_view body = text.substr(at + kPythonTag.size());
  for (std::string_view end : kLlamaEnds) body = body.substr(0, body.find(end));
  body = Trim(body);
  if (body.empty()) {
    turn->unreadable.push_back("<|python_tag|> is followed by nothing");
    return true;
  }
  if (body.front() != '{') {
    turn->calls.push_back({"", kRunPythonTool, Dump(json{{"code", std::string(body)}})});
    return true;
  }
  while (!body.empty()) {
    size_t length = JsonValueLength(body);
    AddCallsFromText(length > 0 ? body.substr(0, length) : body, "<|python_tag|>", turn);
    if (length == 0) break;
    body = TrimLeft(body.substr(length));
    if (!body.empty() && body.front() == ';') body = TrimLeft(body.substr(1));
  }
  return true;
}

// The whole content is a JSON call of run_python (or a list of them), as models do when their
// server passes the tools in the prompt but parses nothing. Only run_python counts: other
// JSON is an answer.
bool ReadBareJson(std::string_view text, ModelTurn* turn) {
  std::string_view body = Unfence(text);
  if (body.empty() || (body.front() != '{' && body.front() != '[')) return false;
  json j = ParseModelJson(body);
  if (j.is_discarded()) return false;
  std::vector<ToolCall> calls;
  for (const json& item : j.is_array() ? j : json::array({j})) {
    ToolCall call;
    std::string why;
    if (!CallFromJson(item, &call, &why) || call.name != kRunPythonTool) return false;
    if (!item.contains("arguments") && !item.contains("parameters") &&
        !(item.contains("function") && item["function"].is_object())) {
      return false;
    }
    calls.push_back(std::move(call));
  }
  if (calls.empty()) return false;
  turn->calls = std::move(calls);
  turn->shape = "json";
  return true;
}

// "functions.run_python" (the namespace some chat formats write before a tool's name) is
// run_python.
void NormalizeNames(std::vector<ToolCall>* calls) {
  constexpr std::string_view kNamespace = "functions.";
  for (ToolCall& call : *calls) {
    call.name = std::string(Trim(call.name));
    if (call.name.rfind(kNamespace, 0) == 0) call.name.erase(0, kNamespace.size());
  }
}

}  // namespace

ModelTurn ReadModelReply(const Message& message) {
  ModelTurn turn;
  turn.thinking = std::string(Trim(message.reasoning));
  std::string text = SplitThinking(message.content, &turn.thinking);
  turn.content = text;
  if (!message.tool_calls.empty()) {
    turn.calls = message.tool_calls;
    for (ToolCall& call : turn.calls) {
      if (Trim(call.arguments).empty()) call.arguments = "{}";
    }
    NormalizeNames(&turn.calls);
    turn.text = std::move(text);
    turn.shape = "tool_calls";
    return turn;
  }
  if (ReadHermes(text, &turn) || ReadMistral(text, &turn) || ReadPythonTag(text, &turn) ||
      ReadBareJson(text, &turn)) {
    NormalizeNames(&turn.calls);
    return turn;
  }
  turn.text = std::move(text);
  turn.fenced_code = ExtractFencedCode(turn.text);
  return turn;
}

std::optional<std::string> RunPythonCode(const ToolCall& call) {
  auto code = ParseRunPythonArguments(call.arguments);
  if (!code.ok()) return std::nullopt;
  return *code;
}

std::optional<std::string> ProgramOf(const ModelTurn& turn) {
  if (turn.fenced_code) return turn.fenced_code;
  for (const ToolCall& call : turn.calls) {
    if (auto code = RunPythonCode(call)) return code;
  }
  return std::nullopt;
}

std::string DescribeEmptyReply(const ModelTurn& turn, std::string_view finish_reason) {
  std::string what = "no text and no tool call";
  if (finish_reason == "length") {
    what += ", finish_reason \"length\" (the server's token limit cut it short)";
  } else if (!finish_reason.empty()) {
    what += ", finish_reason \"" + base::Excerpt(finish_reason, 40) + "\"";
  } else {
    what += ", no finish_reason";
  }
  if (!turn.thinking.empty()) {
    what += ", only " + std::to_string(turn.thinking.size()) + " bytes of thinking";
  }
  return what;
}

void ReplyTextStream::AddContent(std::string_view delta) {
  pending_.append(delta);
  Pump();
}

void ReplyTextStream::AddReasoning(std::string_view delta) {
  if (delta.empty()) return;
  showed_thinking_ = true;
  if (on_thinking_) on_thinking_(delta);
}

void ReplyTextStream::Show(std::string_view text) {
  if (text.empty()) return;
  shown_.append(text);
  if (on_text_) on_text_(text);
}

namespace {

// How many bytes at the end of `text` could be the start of `marker`.
size_t PartialMarkerAtEnd(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

// How many bytes at the end of `text` could start a marker (a call's or a thinking block's).
size_t PartialMarkerLength(std::string_view text) {
  size_t keep = 0;
  for (std::string_view m : kHoldMarkers) keep = std::max(keep, PartialMarkerAtEnd(text, m));
  for (const ThinkTags& tags : kThinkTags) keep = std::max(keep, PartialMarkerAtEnd(text, tags.open));
  return keep;
}

}  // namespace

void ReplyTextStream::Pump() {
  for (;;) {
    switch (state_) {
      case State::kStart: {
        size_t words = pending_.find_first_not_of(" \t\r\n");
        if (words == std::string::npos) return pending_.clear();
        pending_.erase(0, words);
        bool maybe_think = false;
        for (const ThinkTags& tags : kThinkTags) {
          if (pending_.rfind(tags.open, 0) == 0) {
            pending_.erase(0, tags.open.size());
            state_ = State::kThinking;
            break;
          }
          maybe_think = maybe_think || (pending_.size() < tags.open.size() &&
                                        tags.open.substr(0, pending_.size()) == pending_);
        }
        if (state_ == State::kThinking) continue;
        if (maybe_think) return;  // "[THI" or "<thi": wait for the rest
        // A reply that opens with JSON is a call until it is read whole.
        state_ = (pending_[0] == '{' || pending_[0] == '[') ? State::kHeld : State::kText;
        continue;
      }
      case State::kText: {
        size_t at = std::string::npos;
        size_t length = 0;
        bool thinking = false;
        for (std::string_view m : kHoldMarkers) {
          size_t p = pending_.find(m);
          if (p < at) at = p, length = m.size(), thinking = false;
        }
        for (const ThinkTags& tags : kThinkTags) {
          size_t p = pending_.find(tags.open);
          if (p < at) at = p, length = tags.open.size(), thinking = true;
        }
        if (at != std::string::npos) {
          Show(std::string_view(pending_).substr(0, at));
          pending_.erase(0, at + length);
          state_ = thinking ? State::kThinking : State::kHeld;
          continue;
        }
        const size_t keep = PartialMarkerLength(pending_);
        Show(std::string_view(pending_).substr(0, pending_.size() - keep));
        pending_.erase(0, pending_.size() - keep);
        return;
      }
      case State::kThinking: {
        size_t at = std::string::npos;
        size_t length = 0;
        for (const ThinkTags& tags : kThinkTags) {
          size_t p = pending_.find(tags.close);
          if (p < at) at = p, length = tags.close.size();
        }
        if (at != std::string::npos) {
          AddReasoning(std::string_view(pending_).substr(0, at));
          pending_.erase(0, at + length);
          state_ = State::kStart;
          // The words on either side of the hidden block must not read as one marker ("<",
          // then the block, then "think>"): a line break keeps them apart.
          if (PartialMarkerLength(shown_) > 0) Show("\n");
          continue;
        }
        size_t keep = 0;
        for (const ThinkTags& tags : kThinkTags) keep = std::max(keep, PartialMarkerAtEnd(pending_, tags.close));
        AddReasoning(std::string_view(pending_).substr(0, pending_.size() - keep));
        pending_.erase(0, pending_.size() - keep);
        return;
      }
      case State::kHeld:
        return pending_.clear();  // the reader has the whole content
    }
  }
}

void ReplyTextStream::Finish() {
  if (state_ == State::kText || state_ == State::kStart) Show(pending_);
  if (state_ == State::kThinking) AddReasoning(pending_);
  pending_.clear();
}

std::string UnshownAnswer(std::string_view answer, std::string_view shown) {
  std::string_view seen = Trim(shown);
  if (seen.empty()) return std::string(answer);
  if (answer.substr(0, seen.size()) != seen) return "\n" + std::string(answer);
  std::string_view rest = answer.substr(seen.size());
  // Spaces the stream showed after the shared part are not shown again.
  std::string_view shown_tail = TrimLeft(shown).substr(seen.size());
  if (rest.substr(0, shown_tail.size()) == shown_tail) rest.remove_prefix(shown_tail.size());
  return std::string(rest);
}

}  // namespace codebox::llm
