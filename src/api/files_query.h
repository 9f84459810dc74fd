// The files route's query: /v1/boxes/{id}/files?path=P[&mode=0644][&list=1] (GET reads a file,
// a directory as a tar archive, or with list a listing; PUT writes, with mode; DELETE removes).
// One encoder (the remote client) and one checked decoder (the server); the values are
// percent-encoded and decoded by src/http.
#ifndef CODEBOX_API_FILES_QUERY_H_
#define CODEBOX_API_FILES_QUERY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codebox/status.h"

namespace codebox::api {

struct FilesQuery {
  std::string path;                   // in the box; relative: under its workdir
  std::optional<uint32_t> mode = {};  // PUT: permission bits (default 0644)
  bool list = false;                  // GET: the directory's entries as a FileList
};

// The query's parameters, in order, not yet encoded: path, then mode as four octal digits, then
// list=1.
std::vector<std::pair<std::string, std::string>> FilesQueryToParams(const FilesQuery& query);

// kInvalidArgument for a missing or empty path and a mode that is not up to four octal digits;
// "list" is on unless it is "0" or "false". Other parameters are ignored.
StatusOr<FilesQuery> FilesQueryFromParams(const std::map<std::string, std::string>& params);

}  // namespace codebox::api

#endif  // CODEBOX_API_FILES_QUERY_H_
