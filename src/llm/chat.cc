#include "llm/chat.h"

#include <nlohmann/json.hpp>

#include "base/json.h"

namespace codebox::llm {
namespace {

using nlohmann::json;

// Longest piece of a server's body quoted in an error message.
constexpr size_t kQuoteBytes = 300;

std::string Shorten(std::string_view s) {
  if (s.size() <= kQuoteBytes) return std::string(s);
  return std::string(s.substr(0, kQuoteBytes)) + "...";
}

// Servers send null where a field has no value ("content": null beside tool calls).
std::string StringOrEmpty(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

json MessageToJson(const Message& m) {
  json j = {{"role", m.role}};
  if (m.role == "assistant" && !m.tool_calls.empty()) {
    // OpenAI wants null content beside tool calls when there is no text.
    j["content"] = m.content.empty() ? json(nullptr) : json(m.content);
    json calls = json::array();
    for (const ToolCall& c : m.tool_calls) {
      calls.push_back({{"id", c.id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    j["tool_calls"] = std::move(calls);
  } else {
    j["content"] = m.content;
  }
  if (m.role == "tool") j["tool_call_id"] = m.tool_call_id;
  return j;
}

json MessagesArray(const std::vector<Message>& messages) {
  json array = json::array();
  for (const Message& m : messages) array.push_back(MessageToJson(m));
  return array;
}

std::vector<ToolCall> ParseToolCalls(const json& message) {
  std::vector<ToolCall> calls;
  auto it = message.find("tool_calls");
  if (it == message.end() || !it->is_array()) return calls;
  for (const json& c : *it) {
    ToolCall call;
    call.id = StringOrEmpty(c, "id");
    if (auto f = c.find("function"); f != c.end() && f->is_object()) {
      call.name = StringOrEmpty(*f, "name");
      auto args = f->find("arguments");
      // Some servers send the arguments as an object instead of JSON text.
      if (args != f->end()) call.arguments = args->is_string() ? args->get<std::string>() : args->dump();
    }
    calls.push_back(std::move(call));
  }
  return calls;
}

// The thinking beside the content: "reasoning_content" (DeepSeek, vLLM, llama.cpp) or
// "reasoning" (Ollama, OpenRouter).
std::string ReasoningOf(const json& object) {
  std::string text = StringOrEmpty(object, "reasoning_content");
  return text.empty() ? StringOrEmpty(object, "reasoning") : text;
}

// Dump with replacement of invalid UTF-8 (model or program output may hold any bytes);
// the default strict mode would throw.
std::string Dump(const json& j, int indent = -1) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string BuildChatRequestJson(const std::string& model, const std::vector<Message>& messages,
                                 const std::vector<ToolSpec>& tools, bool stream) {
  json body = {{"model", model}, {"messages", MessagesArray(messages)}, {"stream", stream}};
  if (!tools.empty()) {
    json list = json::array();
    for (const ToolSpec& t : tools) {
      json parameters = json::parse(t.parameters_json, nullptr, /*allow_exceptions=*/false);
      if (parameters.is_discarded()) parameters = json::object();  // our own constant; see tools.cc
      list.push_back({{"type", "function"},
                      {"function", {{"name", t.name},
                                    {"description", t.description},
                                    {"parameters", std::move(parameters)}}}});
    }
    body["tools"] = std::move(list);
  }
  return Dump(body);
}

std::string MessagesToJson(const std::vector<Message>& messages) {
  return Dump(MessagesArray(messages), 2);
}

StatusOr<ChatReply> ParseChatReplyJson(std::string_view body) {
  json j = base::ParseJsonOrDiscarded(body);
  if (j.is_discarded() || !j.is_object()) {
    return ProtocolError("reply is not JSON: " + Shorten(body));
  }
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    return ProtocolError("server returned an error: " + ErrorMessageFromBody(body));
  }
  auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array() || choices->empty() ||
      !(*choices)[0].is_object()) {
    return ProtocolError("reply has no choices: " + Shorten(body));
  }
  const json& choice = (*choices)[0];
  auto message = choice.find("message");
  if (message == choice.end() || !message->is_object()) {
    return ProtocolError("reply has no message: " + Shorten(body));
  }
  ChatReply reply;
  reply.message.role = "assistant";
  reply.message.content = StringOrEmpty(*message, "content");
  reply.message.tool_calls = ParseToolCalls(*message);
  reply.message.reasoning = ReasoningOf(*message);
  reply.finish_reason = StringOrEmpty(choice, "finish_reason");
  return reply;
}

std::string ErrorMessageFromBody(std::string_view body) {
  json j = base::ParseJsonOrDiscarded(body);
  if (!j.is_discarded() && j.is_object()) {
    auto e = j.find("error");
    if (e != j.end()) {
      if (e->is_string()) return e->get<std::string>();  // Ollama, llama.cpp (some versions)
      if (e->is_object()) {
        std::string m = StringOrEmpty(*e, "message");
        if (!m.empty()) return m;
      }
    }
    std::string m = StringOrEmpty(j, "message");
    if (!m.empty()) return m;
  }
  std::string s = Shorten(body);
  return s.empty() ? "(empty body)" : s;
}

Status StreamAssembler::AddEventData(std::string_view data) {
  if (data == "[DONE]") {
    done_ = true;
    return Status::Ok();
  }
  json j = base::ParseJsonOrDiscarded(data);
  if (j.is_discarded() || !j.is_object()) {
    return ProtocolError("stream chunk is not JSON: " + Shorten(data));
  }
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    return Unavailable("server reported an error mid-stream: " + ErrorMessageFromBody(data));
  }
  saw_chunk_ = true;
  auto choices = j.find("choices");
  // Chunks without choices exist (usage reports); they carry nothing we need.
  if (choices == j.end() || !choices->is_array() || choices->empty()) return Status::Ok();
  const json& choice = (*choices)[0];
  if (!choice.is_object()) return ProtocolError("stream chunk choice is not an object");
  std::string finish = StringOrEmpty(choice, "finish_reason");
  if (!finish.empty()) reply_.finish_reason = finish;
  auto delta = choice.find("delta");
  // Some servers stream whole messages ("message" in each chunk) instead of deltas.
  if (delta == choice.end() || !delta->is_object()) delta = choice.find("message");
  if (delta == choice.end() || !delta->is_object()) return Status::Ok();
  std::string reasoning = ReasoningOf(*delta);
  if (!reasoning.empty()) {
    reply_.message.reasoning += reasoning;
    if (on_reasoning_) on_reasoning_(reasoning);
  }
  std::string text = StringOrEmpty(*delta, "content");
  if (!text.empty()) {
    reply_.message.content += text;
    if (on_text_) on_text_(text);
  }
  auto calls = delta->find("tool_calls");
  if (calls != delta->end() && calls->is_array()) {
    for (const json& c : *calls) {
      if (!c.is_object()) continue;
      auto idx = c.find("index");
      int index = (idx != c.end() && idx->is_number_integer()) ? idx->get<int>()
                                                               : static_cast<int>(calls_.size());
      ToolCall& call = calls_[index];
      std::string id = StringOrEmpty(c, "id");
      if (!id.empty()) call.id = id;
      if (auto f = c.find("function"); f != c.end() && f->is_object()) {
        // OpenAI sends the name once; some servers repeat it in every fragment.
        std::string name = StringOrEmpty(*f, "name");
        if (call.name.empty()) call.name = name;
        else if (name != call.name) call.name += name;
        auto args = f->find("arguments");
        if (args != f->end()) call.arguments += args->is_string() ? args->get<std::string>() : args->dump();
      }
    }
  }
  return Status::Ok();
}

ChatReply StreamAssembler::TakeReply() {
  reply_.message.role = "assistant";
  reply_.message.tool_calls.clear();
  for (auto& [index, call] : calls_) reply_.message.tool_calls.push_back(std::move(call));
  calls_.clear();
  return std::move(reply_);
}

}  // namespace codebox::llm
