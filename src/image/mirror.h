// Which Debian archive to build images from: the one this machine's apt configuration names.
// Read at run time so that no archive host is ever written into codebox itself.
#ifndef CODEBOX_IMAGE_MIRROR_H_
#define CODEBOX_IMAGE_MIRROR_H_

#include <string>
#include <vector>

#include "codebox/status.h"

namespace codebox::image {

// One "deb" source: an archive URI offering some suites and components.
struct AptSource {
  std::string uri;
  std::vector<std::string> suites;
  std::vector<std::string> components;
};

// Parses one-line-style apt sources (sources.list, *.list): "deb [opts] URI SUITE COMP...".
// deb-src lines and comments are skipped.
std::vector<AptSource> ParseOneLineSources(const std::string& text);
// Parses deb822-style sources (*.sources): stanzas with Types/URIs/Suites/Components;
// stanzas without "deb" in Types or with "Enabled: no" are skipped.
std::vector<AptSource> ParseDeb822Sources(const std::string& text);

// The first source offering exactly `suite` (not SUITE-updates / SUITE-security) with the
// "main" component; its URI without a trailing slash. kNotFound when none does.
StatusOr<std::string> PickMirror(const std::vector<AptSource>& sources, const std::string& suite);

// Reads `apt_dir`/sources.list and `apt_dir`/sources.list.d/*.list|*.sources (sorted, as apt
// does) and picks the mirror for `suite`. $CODEBOX_MIRROR, when set, wins.
StatusOr<std::string> FindMirror(const std::string& suite, const std::string& apt_dir = "/etc/apt");

}  // namespace codebox::image

#endif  // CODEBOX_IMAGE_MIRROR_H_
