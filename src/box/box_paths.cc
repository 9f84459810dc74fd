#include "box/box_paths.h"

#include <algorithm>
#include <string_view>

namespace codebox::box {

std::string ResolveBoxPath(const std::string& workdir, const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  return workdir + "/" + path;
}

Status CheckBoxPath(const std::string& path, const char* what) {
  if (path.empty()) {
    return InvalidArgument(std::string(what) + ": the box path is empty (\".\" is the workdir)");
  }
  if (path.find('\0') != std::string::npos) {
    return InvalidArgument(std::string(what) + ": the box path contains a NUL byte");
  }
  return Status::Ok();
}

std::string CleanBoxPath(const std::string& workdir, const std::string& path) {
  std::string resolved = ResolveBoxPath(workdir, path), clean;
  size_t start = 0;
  while (start <= resolved.size()) {
    size_t end = std::min(resolved.find('/', start), resolved.size());
    std::string_view part(resolved.data() + start, end - start);
    if (!part.empty() && part != ".") clean.append("/").append(part);
    start = end + 1;
  }
  return clean.empty() ? "/" : clean;
}

}  // namespace codebox::box
