#include "api/files_query.h"

#include <cstdio>

#include "base/json.h"

namespace codebox::api {

std::vector<std::pair<std::string, std::string>> FilesQueryToParams(const FilesQuery& query) {
  std::vector<std::pair<std::string, std::string>> params = {{"path", query.path}};
  if (query.mode) {
    char text[8];
    std::snprintf(text, sizeof text, "%04o", *query.mode & 07777);
    params.emplace_back("mode", text);
  }
  if (query.list) params.emplace_back("list", "1");
  return params;
}

StatusOr<FilesQuery> FilesQueryFromParams(const std::map<std::string, std::string>& params) {
  FilesQuery query;
  auto path = params.find("path");
  if (path == params.end() || path->second.empty()) {
    return InvalidArgument("the query parameter 'path' is required: ?path=/work/file");
  }
  query.path = path->second;
  if (auto mode = params.find("mode"); mode != params.end()) {
    const std::string& text = mode->second;
    const bool octal = !text.empty() && text.size() <= 4 &&
                       text.find_first_not_of("01234567") == std::string::npos;
    if (!octal) {
      return InvalidArgument("mode '" + base::Excerpt(text) +
                             "' is not octal permission bits like 0644");
    }
    query.mode = static_cast<uint32_t>(std::stoul(text, nullptr, 8));
  }
  if (auto list = params.find("list"); list != params.end()) {
    query.list = list->second != "0" && list->second != "false";
  }
  return query;
}

}  // namespace codebox::api
