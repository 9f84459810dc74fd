#include "image/oci_reference.h"

#include <arpa/inet.h>

#include <vector>

namespace codebox::image {
namespace {

constexpr char kDefaultRegistry[] = "docker.io";
constexpr size_t kMaxNameLength = 255;
constexpr size_t kMaxTagLength = 128;

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }

// path-component: [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
bool IsPathComponent(std::string_view s) {
  if (s.empty() || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  for (size_t i = 0; i < s.size();) {
    if (IsLowerAlnum(s[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < s.size() && !IsLowerAlnum(s[j])) ++j;
    std::string_view sep = s.substr(i, j - i);
    bool dashes = sep.find_first_not_of('-') == std::string_view::npos;
    if (sep != "." && sep != "_" && sep != "__" && !dashes) return false;
    i = j;
  }
  return true;
}

// domain: labels of [A-Za-z0-9-] (not starting or ending with '-') joined by '.', then an
// optional :port.
bool IsDomain(std::string_view s) {
  size_t colon = s.rfind(':');
  if (colon != std::string_view::npos) {
    std::string_view port = s.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != port.npos)
      return false;
    s = s.substr(0, colon);
  }
  if (s.empty()) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string_view label = s.substr(start, dot == s.npos ? s.npos : dot - start);
    if (label.empty() || label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!IsAlnum(c) && c != '-') return false;
    }
    if (dot == s.npos) return true;
    start = dot + 1;
  }
}

// tag: [\w][\w.-]{0,127}
bool IsTag(std::string_view s) {
  if (s.empty() || s.size() > kMaxTagLength) return false;
  auto word = [](char c) { return IsAlnum(c) || c == '_'; };
  if (!word(s.front())) return false;
  for (char c : s) {
    if (!word(c) && c != '.' && c != '-') return false;
  }
  return true;
}

std::string Quote(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 300)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out + "'";
}

}  // namespace

bool IsSha256Digest(std::string_view digest) {
  return digest.size() == 71 && digest.starts_with("sha256:") &&
         digest.substr(7).find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::string ImageReference::Canonical() const {
  std::string out = Repository();
  if (!tag.empty()) out += ":" + tag;
  if (!digest.empty()) out += "@" + digest;
  return out;
}

std::string ImageReference::Familiar() const {
  std::string name = repository;
  if (registry == kDefaultRegistry) {
    if (name.starts_with("library/")) name = name.substr(8);
  } else {
    name = registry + "/" + name;
  }
  if (!tag.empty()) name += ":" + tag;
  if (!digest.empty()) name += "@" + digest;
  return name;
}

ImageReference ImageReference::AtDigest(const std::string& d) const {
  ImageReference r = *this;
  r.tag.clear();
  r.digest = d;
  return r;
}

StatusOr<ImageReference> ParseImageReference(std::string_view text) {
  const std::string what = "image reference " + Quote(text);
  ImageReference ref;
  std::string_view rest = text;
  if (size_t at = rest.find('@'); at != std::string_view::npos) {
    ref.digest = std::string(rest.substr(at + 1));
    rest = rest.substr(0, at);
    if (!IsSha256Digest(ref.digest)) {
      return InvalidArgument(what + ": the digest must be sha256: and 64 lower-case hex digits");
    }
  }
  // A tag follows the last ':' that comes after the last '/' (an earlier ':' is a port).
  size_t slash = rest.rfind('/');
  size_t colon = rest.rfind(':');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    ref.tag = std::string(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
    if (!IsTag(ref.tag)) {
      return InvalidArgument(what + ": the tag must be letters, digits, '_', '.', '-' (at most " +
                             std::to_string(kMaxTagLength) + ", not starting with '.' or '-')");
    }
  }
  if (rest.empty()) return InvalidArgument(what + ": no image name");
  if (rest.size() > kMaxNameLength) {
    return InvalidArgument(what + ": the name is longer than " + std::to_string(kMaxNameLength));
  }
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    size_t next = rest.find('/', start);
    parts.push_back(rest.substr(start, next == rest.npos ? rest.npos : next - start));
    if (next == rest.npos) break;
    start = next + 1;
  }
  // The first part is a registry when it looks like a host: a '.', a port, or "localhost".
  std::string_view first = parts.front();
  if (parts.size() > 1 &&
      (first.find('.') != first.npos || first.find(':') != first.npos || first == "localhost")) {
    if (!IsDomain(first)) return InvalidArgument(what + ": bad registry host " + Quote(first));
    ref.registry = std::string(first);
    parts.erase(parts.begin());
  } else {
    ref.registry = kDefaultRegistry;
  }
  for (std::string_view part : parts) {
    if (!IsPathComponent(part)) {
      return InvalidArgument(what + ": bad name component " + Quote(part) +
                             " (lower-case letters and digits, separated by '.', '_', '__' or "
                             "'-')");
    }
    if (!ref.repository.empty()) ref.repository += "/";
    ref.repository += part;
  }
  if (ref.registry == kDefaultRegistry && parts.size() == 1) {
    ref.repository = "library/" + ref.repository;
  }
  if (ref.tag.empty() && ref.digest.empty()) ref.tag = "latest";
  return ref;
}

bool IsLocalRegistry(std::string_view registry) {
  std::string host(registry);
  if (host.starts_with("[")) {
    size_t end = host.find(']');
    if (end == std::string::npos) return false;
    host = host.substr(1, end - 1);
  } else if (size_t colon = host.rfind(':'); colon != std::string::npos) {
    host = host.substr(0, colon);
  }
  if (host == "localhost") return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    uint32_t a = ntohl(v4.s_addr);
    return (a >> 24) == 127 || (a >> 24) == 10 || (a >> 20) == 0xac1 || (a >> 16) == 0xc0a8;
  }
  in6_addr v6{};
  return ::inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace codebox::image
