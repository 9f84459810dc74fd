// Box::InstallPackages' plan: pip's command line and the hosts the install may reach, from the
// caller's package names and index URL. Checked here, before anything reaches the box: a name
// that could become a pip option, or an index URL that is not http(s), is refused with an error
// that names it.
#ifndef CODEBOX_BOX_INSTALL_H_
#define CODEBOX_BOX_INSTALL_H_

#include <string>
#include <vector>

#include "codebox/status.h"
#include "net/egress_policy.h"

namespace codebox::box {

// The most package names one install takes, and the longest name or index URL.
inline constexpr size_t kMaxInstallPackages = 256;
inline constexpr size_t kMaxRequirementBytes = 256;
inline constexpr size_t kMaxIndexUrlBytes = 2048;

struct PipInstall {
  // python3 -m pip install --user ... [--index-url URL] -- NAMES
  std::vector<std::string> argv;
  // The index's host (with its port), and for the public index the host of its files: allowed
  // for the install only (EgressService::AllowForAWhile).
  std::vector<net::HostPattern> allow;
};

// `packages`: pip requirement specifiers of letters, digits, spaces and . _ - [ ] , < > = ! ~,
// starting with a letter or digit ("pandas", "numpy>=1.26,<2", "requests[socks]").
// `index_url`: http:// or https://, or empty for the public Python package index.
StatusOr<PipInstall> PlanPipInstall(const std::vector<std::string>& packages,
                                    const std::string& index_url);

}  // namespace codebox::box

#endif  // CODEBOX_BOX_INSTALL_H_
