#include "box/install.h"

#include <cctype>

#include "base/text.h"

namespace codebox::box {

namespace {

// pip's own default index, and where its files are served from.
constexpr char kPublicIndexHost[] = "pypi.org";
constexpr char kPublicFilesHost[] = "files.pythonhosted.org";

bool IsRequirementChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("._-[],<>=!~ ").find(c) != std::string_view::npos;
}

Status CheckRequirement(const std::string& name) {
  const std::string shown = "\"" + base::TerminalSafe(name, 300) + "\"";
  const char* accepted =
      ": a package is a pip requirement of letters, digits, spaces and . _ - [ ] , < > = ! ~ "
      "that starts with a letter or digit (e.g. \"pandas\" or \"numpy>=1.26,<2\")";
  if (name.empty()) return InvalidArgument("install packages: an empty package name");
  if (name.size() > kMaxRequirementBytes) {
    return InvalidArgument("install packages: " + shown + " is longer than " +
                           std::to_string(kMaxRequirementBytes) + " bytes");
  }
  // The first character decides that pip reads a name, never an option ("-r file").
  if (!std::isalnum(static_cast<unsigned char>(name[0]))) {
    return InvalidArgument("install packages: " + shown + " does not start with a letter or digit" +
                           accepted);
  }
  for (char c : name) {
    if (!IsRequirementChar(c)) {
      return InvalidArgument("install packages: " + shown + " has a character pip is not given" +
                             " here" + accepted);
    }
  }
  return Status::Ok();
}

// The host pattern ("host:port") of an http(s) URL; errors name index_url.
StatusOr<net::HostPattern> IndexHost(const std::string& url, bool* plain_http) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("install packages: index_url \"" + base::TerminalSafe(url, 300) + "\" " +
                           why);
  };
  if (url.size() > kMaxIndexUrlBytes) {
    return bad("is longer than " + std::to_string(kMaxIndexUrlBytes) + " bytes");
  }
  for (char c : url) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return bad("contains a space or a control character");
    }
  }
  std::string lower = url.substr(0, 8);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t start;
  if (lower.rfind("https://", 0) == 0) {
    start = 8;
    *plain_http = false;
  } else if (lower.rfind("http://", 0) == 0) {
    start = 7;
    *plain_http = true;
  } else {
    return bad("is not an http:// or https:// URL (e.g. https://my-index.example/simple)");
  }
  std::string authority = url.substr(start, url.find_first_of("/?#", start) - start);
  if (size_t at = authority.rfind('@'); at != std::string::npos) authority.erase(0, at + 1);
  auto split = net::SplitHostPort(authority);
  if (!split.ok()) return bad("has no host pip could reach: " + split.status().message());
  auto host = net::NormalizeHost(split->host);
  if (!host.ok()) return bad("has no host pip could reach: " + host.status().message());
  uint16_t port = split->port.value_or(*plain_http ? 80 : 443);
  bool v6 = host->find(':') != std::string::npos;
  auto pattern =
      net::ParseHostPattern((v6 ? "[" + *host + "]" : *host) + ":" + std::to_string(port));
  if (!pattern.ok()) return bad(pattern.status().message());
  return *pattern;
}

}  // namespace

StatusOr<PipInstall> PlanPipInstall(const std::vector<std::string>& packages,
                                    const std::string& index_url) {
  if (packages.empty()) return InvalidArgument("install packages: no package names given");
  if (packages.size() > kMaxInstallPackages) {
    return InvalidArgument("install packages: " + std::to_string(packages.size()) +
                           " packages; one install takes at most " +
                           std::to_string(kMaxInstallPackages));
  }
  for (const std::string& name : packages) RETURN_IF_ERROR(CheckRequirement(name));

  PipInstall plan;
  // --user into HOME=/root (writable; ~/.local is on a later python3's sys.path); Debian's
  // python3 refuses pip installs without --break-system-packages (PEP 668).
  plan.argv = {"python3",
               "-m",
               "pip",
               "install",
               "--user",
               "--break-system-packages",
               "--disable-pip-version-check",
               "--no-input",
               "--progress-bar",
               "off"};
  if (index_url.empty()) {
    for (const char* host : {kPublicIndexHost, kPublicFilesHost}) {
      ASSIGN_OR_RETURN(net::HostPattern p, net::ParseHostPattern(std::string(host) + ":443"));
      plan.allow.push_back(std::move(p));
    }
  } else {
    bool plain_http = false;
    ASSIGN_OR_RETURN(net::HostPattern p, IndexHost(index_url, &plain_http));
    plan.argv.insert(plan.argv.end(), {"--index-url", index_url});
    // pip ignores a plain-http index unless trusted; the caller named this one.
    if (plain_http) plan.argv.insert(plan.argv.end(), {"--trusted-host", p.ToString()});
    plan.allow.push_back(std::move(p));
  }
  plan.argv.push_back("--");  // whatever follows is a requirement, never an option
  plan.argv.insert(plan.argv.end(), packages.begin(), packages.end());
  return plan;
}

}  // namespace codebox::box
