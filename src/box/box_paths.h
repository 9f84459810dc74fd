// Box paths as the file calls take them: relative ones under the box's workdir.
#ifndef CODEBOX_BOX_BOX_PATHS_H_
#define CODEBOX_BOX_BOX_PATHS_H_

#include <string>

#include "codebox/status.h"

namespace codebox::box {

// `path` as is when absolute, else under `workdir`.
std::string ResolveBoxPath(const std::string& workdir, const std::string& path);

// A path the file calls accept: not empty, no NUL (the agent's system calls would cut it);
// `what` names the call in the error.
Status CheckBoxPath(const std::string& path, const char* what);

// `path` under the workdir without "." components and doubled or trailing slashes: the
// directory as ListDir names it in its entries' paths ("." is the workdir itself).
std::string CleanBoxPath(const std::string& workdir, const std::string& path);

}  // namespace codebox::box

#endif  // CODEBOX_BOX_BOX_PATHS_H_
