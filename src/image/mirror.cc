#include "image/mirror.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "base/io.h"
#include "base/text.h"

namespace codebox::image {
namespace {

std::vector<std::string> SplitWords(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> words;
  std::string w;
  while (in >> w) words.push_back(w);
  return words;
}

std::string StripComment(const std::string& line) {
  size_t hash = line.find('#');
  return hash == std::string::npos ? line : line.substr(0, hash);
}

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

void AddDeb822Stanza(const std::vector<std::pair<std::string, std::string>>& fields,
                     std::vector<AptSource>& out) {
  std::vector<std::string> types, uris, suites, components;
  bool enabled = true;
  for (const auto& [key, value] : fields) {
    if (key == "types") types = SplitWords(value);
    if (key == "uris") uris = SplitWords(value);
    if (key == "suites") suites = SplitWords(value);
    if (key == "components") components = SplitWords(value);
    if (key == "enabled")
      enabled = base::AsciiLower(SplitWords(value).empty() ? "" : SplitWords(value)[0]) != "no";
  }
  if (!enabled || !Contains(types, "deb")) return;
  for (const std::string& uri : uris) out.push_back({uri, suites, components});
}

}  // namespace

std::vector<AptSource> ParseOneLineSources(const std::string& text) {
  std::vector<AptSource> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> words = SplitWords(StripComment(line));
    if (words.size() < 3 || words[0] != "deb") continue;
    size_t i = 1;
    // Options: "[arch=amd64 signed-by=...]", possibly spread over several words.
    if (words[i].starts_with("[")) {
      while (i < words.size() && words[i].find(']') == std::string::npos) ++i;
      ++i;
    }
    if (i + 1 >= words.size()) continue;
    AptSource source;
    source.uri = words[i];
    source.suites = {words[i + 1]};
    source.components.assign(words.begin() + static_cast<long>(i) + 2, words.end());
    out.push_back(std::move(source));
  }
  return out;
}

std::vector<AptSource> ParseDeb822Sources(const std::string& text) {
  std::vector<AptSource> out;
  std::vector<std::pair<std::string, std::string>> fields;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.starts_with("#")) continue;
    if (line.find_first_not_of(" \t") == std::string::npos) {
      if (!fields.empty()) AddDeb822Stanza(fields, out);
      fields.clear();
      continue;
    }
    if (line[0] == ' ' || line[0] == '\t') {  // a continuation line of the previous field
      if (!fields.empty()) fields.back().second += " " + line;
      continue;
    }
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    fields.emplace_back(base::AsciiLower(line.substr(0, colon)),
                        StripComment(line.substr(colon + 1)));
  }
  if (!fields.empty()) AddDeb822Stanza(fields, out);
  return out;
}

StatusOr<std::string> PickMirror(const std::vector<AptSource>& sources, const std::string& suite) {
  for (const AptSource& s : sources) {
    if (!Contains(s.suites, suite) || !Contains(s.components, "main")) continue;
    // debootstrap fetches over plain files, http or https; skip cdrom: and the like.
    if (!s.uri.starts_with("http://") && !s.uri.starts_with("https://") &&
        !s.uri.starts_with("file:/")) {
      continue;
    }
    std::string uri = s.uri;
    while (uri.size() > 1 && uri.back() == '/') uri.pop_back();
    return uri;
  }
  return NotFound("no apt source offers suite '" + suite +
                  "' with component main (looked for a 'deb' entry in the apt sources); "
                  "set CODEBOX_MIRROR to a Debian archive URI");
}

StatusOr<std::string> FindMirror(const std::string& suite, const std::string& apt_dir) {
  if (const char* v = std::getenv("CODEBOX_MIRROR"); v != nullptr && *v != '\0')
    return std::string(v);
  std::vector<AptSource> sources;
  if (auto text = base::ReadFile(apt_dir + "/sources.list"); text.ok()) {
    sources = ParseOneLineSources(*text);
  }
  std::vector<std::string> names;
  std::string dir = apt_dir + "/sources.list.d";
  if (DIR* d = ::opendir(dir.c_str())) {
    while (struct dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    bool one_line = name.ends_with(".list");
    if (!one_line && !name.ends_with(".sources")) continue;  // e.g. *.disabled, *.save
    auto text = base::ReadFile(dir + "/" + name);
    if (!text.ok()) continue;
    std::vector<AptSource> more = one_line ? ParseOneLineSources(*text) : ParseDeb822Sources(*text);
    sources.insert(sources.end(), more.begin(), more.end());
  }
  auto mirror = PickMirror(sources, suite);
  if (!mirror.ok()) return mirror.status().WithContext("find Debian archive in " + apt_dir);
  return mirror;
}

}  // namespace codebox::image
