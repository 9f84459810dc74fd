#include "interpreter/ipython_decoder.h"

#include <algorithm>
#include <array>

#include "base/json.h"
#include "protocol/message.h"

namespace codebox::interpreter {

namespace {

using protocol::Json;

constexpr std::array<std::string_view, 11> kKnownMimes = {
    "text/plain",     "text/html",        "text/markdown",
    "text/latex",     "image/png",        "image/jpeg",
    "image/svg+xml",  "application/json", "application/javascript",
    "application/pdf", std::string_view(kChartMime)};

bool IsBinaryMime(std::string_view mime) {
  return mime == "image/png" || mime == "image/jpeg" || mime == "application/pdf";
}

bool IsBase64(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/' || c == '=' || c == '\n' || c == '\r';
  });
}

// The longest prefix of valid UTF-8 `text` that fits `bytes` without splitting a character.
std::string_view Utf8Prefix(std::string_view text, size_t bytes) {
  if (bytes >= text.size()) return text;
  while (bytes > 0 && (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) --bytes;
  return text.substr(0, bytes);
}

Status Bad(const std::string& what) { return ProtocolError(what); }

// A string field, cut to `limit` bytes (at a character boundary).
StatusOr<std::string> Text(const Json& m, const char* field, size_t limit) {
  ASSIGN_OR_RETURN(std::string s, protocol::GetString(m, field));
  if (s.size() > limit) s = std::string(Utf8Prefix(s, limit));
  return s;
}

}  // namespace

bool IsKnownMime(std::string_view mime) {
  return std::find(kKnownMimes.begin(), kKnownMimes.end(), mime) != kKnownMimes.end();
}

KernelDecoder::KernelDecoder(uint64_t output_limit)
    : output_limit_(output_limit),
      max_line_(std::min<uint64_t>(output_limit, 1ull << 40) + kLineSlack),
      max_items_(std::max(kMinItems, output_limit / kItemBytes)) {}

void KernelDecoder::BeginCell(int64_t id) {
  cell_id_ = id;
  cell_done_ = false;
  used_ = 0;
  items_ = 0;
  main_seen_ = false;
  execution_ = Execution();
  emits_.clear();
}

std::vector<Emit> KernelDecoder::TakeEmits() { return std::exchange(emits_, {}); }

bool KernelDecoder::Charge(uint64_t bytes) {
  if (bytes > output_limit_ - std::min(used_, output_limit_) || items_ >= max_items_) {
    execution_.output_truncated = true;
    return false;
  }
  used_ += bytes;
  ++items_;
  return true;
}

Status KernelDecoder::Feed(std::string_view bytes) {
  if (!broken_.ok()) return broken_;
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    std::string_view piece = bytes.substr(0, nl);
    if (partial_.size() + piece.size() > max_line_) {
      broken_ = Bad("a line longer than " + std::to_string(max_line_) + " bytes");
      partial_.clear();
      return broken_;
    }
    if (nl == std::string_view::npos) {
      partial_.append(piece);
      return Status::Ok();
    }
    Status st;
    if (partial_.empty()) {
      st = Line(piece);
    } else {
      partial_.append(piece);
      st = Line(partial_);
      partial_.clear();
    }
    if (!st.ok()) {
      broken_ = st;
      return broken_;
    }
    bytes.remove_prefix(nl + 1);
  }
  return Status::Ok();
}

Status KernelDecoder::Line(std::string_view line) {
  auto parsed = protocol::ParseControl(line);
  if (!parsed.ok()) return Bad("not a JSON object (" + parsed.status().message() + ")");
  const Json& m = *parsed;
  ASSIGN_OR_RETURN(std::string type, protocol::GetString(m, "type"));
  if (type == "ready") {
    ASSIGN_OR_RETURN(int64_t version, protocol::GetInt(m, "protocol"));
    if (version != 1) return Bad("kernel speaks protocol " + std::to_string(version) + ", not 1");
    if (ready_) return Bad("a second ready");
    auto ipython = Text(m, "ipython", 64);
    if (ipython.ok()) ipython_version_ = *ipython;
    ready_ = true;
    return Status::Ok();
  }
  if (type == "fatal") {
    ASSIGN_OR_RETURN(std::string kind, Text(m, "kind", 64));
    ASSIGN_OR_RETURN(std::string message, Text(m, "message", 4096));
    if (ready_) return Bad("fatal after ready: " + message);
    fatal_ = KernelFatal{std::move(kind), std::move(message)};
    return Status::Ok();
  }
  if (type != "stream" && type != "display" && type != "error" && type != "done") {
    return Bad("unknown message type \"" + type.substr(0, 64) + "\"");
  }
  if (!ready_) return Bad(type + " before ready");
  ASSIGN_OR_RETURN(int64_t id, protocol::GetInt(m, "id"));
  if (id != cell_id_ || cell_done_) return Status::Ok();  // another cell's (late) output

  if (type == "stream") {
    ASSIGN_OR_RETURN(std::string name, protocol::GetString(m, "name"));
    if (name != "stdout" && name != "stderr")
      return Bad("stream name \"" + name.substr(0, 64) + "\"");
    ASSIGN_OR_RETURN(std::string text, protocol::GetString(m, "text"));
    uint64_t room = output_limit_ - std::min(used_, output_limit_);
    if (text.size() > room) {
      text = std::string(Utf8Prefix(text, static_cast<size_t>(room)));
      execution_.output_truncated = true;
    }
    if (text.empty() || !Charge(text.size())) return Status::Ok();
    const bool out = name == "stdout";
    (out ? execution_.stdout_chunks : execution_.stderr_chunks).push_back(text);
    emits_.push_back({out ? Emit::kStdout : Emit::kStderr, std::move(text), {}});
    return Status::Ok();
  }
  if (type == "display") {
    auto data = m.find("data");
    if (data == m.end() || !data->is_object()) return Bad("display without a \"data\" object");
    ASSIGN_OR_RETURN(bool main, protocol::GetBool(m, "main", false));
    ASSIGN_OR_RETURN(bool cut, protocol::GetBool(m, "truncated", false));
    if (cut) execution_.output_truncated = true;
    CellResult result;
    uint64_t bytes = 0;
    for (const auto& [mime, value] : data->items()) {
      if (!IsKnownMime(mime)) continue;
      if (!value.is_string()) return Bad("display value for " + mime + " is not a string");
      const std::string& text = value.get_ref<const std::string&>();
      if (IsBinaryMime(mime) && !IsBase64(text)) return Bad(mime + " value is not base64");
      if (mime == "application/json" || mime == kChartMime) {
        // Nesting bounded too: the kernel writes what the cell wants.
        if (base::ParseJsonOrDiscarded(text).is_discarded()) {
          return Bad(mime + " value is not JSON (or nests past 64 levels)");
        }
      }
      bytes += mime.size() + text.size();
      result.data.emplace(mime, text);
    }
    if (result.data.empty()) return Status::Ok();
    // The first main result is the cell's; a second claim is only a display.
    result.is_main_result = main && !main_seen_;
    main_seen_ = main_seen_ || main;
    if (!Charge(bytes)) return Status::Ok();
    execution_.results.push_back(result);
    emits_.push_back({Emit::kResult, {}, std::move(result)});
    return Status::Ok();
  }
  if (type == "error") {
    ASSIGN_OR_RETURN(std::string name, Text(m, "name", 1024));
    ASSIGN_OR_RETURN(std::string value, Text(m, "value", kMaxErrorField));
    ASSIGN_OR_RETURN(std::string traceback, Text(m, "traceback", kMaxErrorField));
    if (!execution_.error) {
      execution_.error = CellError{std::move(name), std::move(value), std::move(traceback)};
    }
    return Status::Ok();
  }
  // done
  ASSIGN_OR_RETURN(int64_t count, protocol::GetInt(m, "execution_count"));
  if (count < 0) return Bad("negative execution_count");
  execution_.execution_count = count;
  cell_done_ = true;
  return Status::Ok();
}

}  // namespace codebox::interpreter
