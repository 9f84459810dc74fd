// Where codebox keeps its state, and where its own binaries are.
#ifndef CODEBOX_BASE_PATHS_H_
#define CODEBOX_BASE_PATHS_H_

#include <string>

namespace codebox::base {

// The store root: `override_home` if non-empty, else $CODEBOX_HOME, else /var/lib/codebox
// for root, else $XDG_DATA_HOME/codebox or ~/.local/share/codebox.
std::string CodeboxHome(const std::string& override_home = "");

// Directory holding the running executable (readlink /proc/self/exe).
std::string SelfExeDir();

// Path of a codebox helper binary (codebox-agent, ...): the variable named after it if set
// ($CODEBOX_AGENT for codebox-agent), else $CODEBOX_LIBEXEC/NAME if set, else
// beside the running executable, else ../bin/NAME or ../libexec/codebox/NAME from it.
// Empty if not found.
std::string FindHelperBinary(const std::string& name);

}  // namespace codebox::base

#endif  // CODEBOX_BASE_PATHS_H_
