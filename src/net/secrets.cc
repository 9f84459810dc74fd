#include "net/secrets.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "base/json.h"
#include "base/text.h"

namespace codebox::net {
namespace {

constexpr std::string_view kWord = "CODEBOX_SECRET";

// `text` at `at` starts with `literal` or with its percent-encoding (%3C, %3c...).
size_t MatchChar(std::string_view text, size_t at, char literal) {
  if (at < text.size() && text[at] == literal) return 1;
  static constexpr char kHex[] = "0123456789ABCDEF";
  const unsigned char c = static_cast<unsigned char>(literal);
  if (at + 3 <= text.size() && text[at] == '%' &&
      std::toupper(static_cast<unsigned char>(text[at + 1])) == kHex[c >> 4] &&
      std::toupper(static_cast<unsigned char>(text[at + 2])) == kHex[c & 15]) {
    return 3;
  }
  return 0;
}

// The same, ending at `end` (exclusive): the length matched before it.
size_t MatchCharBefore(std::string_view text, size_t end, char literal) {
  if (end >= 1 && MatchChar(text, end - 1, literal) == 1) return 1;
  if (end >= 3 && MatchChar(text, end - 3, literal) == 3) return 3;
  return 0;
}

struct Placeholder {
  size_t begin = 0;
  size_t end = 0;
  std::string name;
};

// The next "<CODEBOX_SECRET:NAME>" at or after `from`, each of '<', ':', '>' as written or
// percent-encoded.
std::optional<Placeholder> NextPlaceholder(std::string_view text, size_t from) {
  for (size_t at = text.find(kWord, from); at != std::string_view::npos;
       at = text.find(kWord, at + 1)) {
    const size_t open = MatchCharBefore(text, at, '<');
    size_t i = at + kWord.size();
    const size_t colon = MatchChar(text, i, ':');
    if (open == 0 || colon == 0) continue;
    i += colon;
    const size_t name_begin = i;
    while (i < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) {
      ++i;
    }
    const size_t close = MatchChar(text, i, '>');
    if (i == name_begin || close == 0) continue;
    return Placeholder{at - open, i + close, std::string(text.substr(name_begin, i - name_begin))};
  }
  return std::nullopt;
}

bool StartsWithNoCase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && base::AsciiLower(text.substr(0, prefix.size())) == prefix;
}

}  // namespace

StatusOr<SecretInjector> SecretInjector::Make(const std::vector<Secret>& secrets) {
  SecretInjector out;
  for (const Secret& secret : secrets) {
    Rule rule{secret.name, secret.value, {}};
    for (const std::string& host : secret.hosts) {
      auto pattern = ParseHostPattern(host);
      if (!pattern.ok()) return pattern.status().WithContext("secret " + secret.name);
      rule.hosts.push_back(std::move(*pattern));
    }
    out.secrets_.push_back(std::move(rule));
  }
  return out;
}

const SecretInjector::Rule* SecretInjector::Find(std::string_view name) const {
  for (const Rule& rule : secrets_) {
    if (rule.name == name) return &rule;
  }
  return nullptr;
}

bool SecretInjector::Allows(const Rule& rule, std::string_view host, uint16_t port) const {
  auto normalized = NormalizeHost(host);
  if (!normalized.ok()) return false;
  return std::any_of(rule.hosts.begin(), rule.hosts.end(), [&](const HostPattern& pattern) {
    return pattern.MatchesName(*normalized, port);
  });
}

bool SecretInjector::IsSecretHost(std::string_view host, uint16_t port) const {
  return std::any_of(secrets_.begin(), secrets_.end(),
                     [&](const Rule& rule) { return Allows(rule, host, port); });
}

Status SecretInjector::ReplaceIn(std::string& text, bool in_target, std::string_view host,
                                 uint16_t port, std::vector<std::string>* injected) const {
  size_t from = 0;
  while (auto found = NextPlaceholder(text, from)) {
    const Rule* rule = Find(found->name);
    if (rule == nullptr) {  // not one of this box's secrets: plain text
      from = found->end;
      continue;
    }
    if (!Allows(*rule, host, port)) {
      std::string where;
      for (const HostPattern& p : rule->hosts) where += (where.empty() ? "" : ", ") + p.ToString();
      return PermissionDenied("the request to " + base::Excerpt(host, 100) + ":" +
                              std::to_string(port) + " carries the placeholder of secret " +
                              rule->name + ", which may be sent only to " + where +
                              "; the request was not sent");
    }
    const std::string value = in_target ? base::PercentEncode(rule->value) : rule->value;
    text.replace(found->begin, found->end - found->begin, value);
    from = found->begin + value.size();
    if (std::find(injected->begin(), injected->end(), rule->name) == injected->end()) {
      injected->push_back(rule->name);
    }
  }
  return Status::Ok();
}

StatusOr<std::string> SecretInjector::Rewrite(std::string_view head, std::string_view host,
                                              uint16_t port,
                                              std::vector<std::string>* injected) const {
  std::string out;
  bool first = true;
  while (!head.empty()) {
    const size_t end = head.find("\r\n");
    std::string line(head.substr(0, end));
    head = end == std::string_view::npos ? std::string_view() : head.substr(end + 2);
    if (!first && StartsWithNoCase(line, "authorization:")) {
      // "Basic base64(user:password)": a URL's credentials, encoded by the box's client.
      std::string_view value = std::string_view(line).substr(14);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
        value.remove_prefix(1);
      }
      if (StartsWithNoCase(value, "basic ")) {
        auto decoded = base::DecodeBase64(value.substr(6), 8 << 10);
        if (decoded.ok()) {
          std::string credentials = *decoded;
          RETURN_IF_ERROR(ReplaceIn(credentials, false, host, port, injected));
          if (credentials != *decoded) {
            line = "Authorization: Basic " + base::EncodeBase64(credentials);
          }
        }
      }
    }
    RETURN_IF_ERROR(ReplaceIn(line, first, host, port, injected));
    out += line;
    if (end != std::string_view::npos) out += "\r\n";
    first = false;
  }
  return out;
}

bool PlaceholderScanner::Feed(std::string_view bytes) {
  // "CODEBOX_SECRET" then ':' or "%3A": 17 bytes at most, so a start split across chunks lies
  // within the last 16 bytes kept and the first 17 of the next chunk.
  constexpr size_t kKeep = kWord.size() + 2;
  auto holds_start = [](std::string_view text) {
    for (size_t at = text.find(kWord); at != std::string_view::npos;
         at = text.find(kWord, at + 1)) {
      if (MatchChar(text, at + kWord.size(), ':') != 0) return true;
    }
    return false;
  };
  const std::string seam = tail_ + std::string(bytes.substr(0, kKeep + 1));
  const bool seen = holds_start(seam) || holds_start(bytes);
  if (bytes.size() >= kKeep) {
    tail_ = std::string(bytes.substr(bytes.size() - kKeep));
  } else {
    tail_ += bytes;
    if (tail_.size() > kKeep) tail_.erase(0, tail_.size() - kKeep);
  }
  return seen;
}

}  // namespace codebox::net
