#include "api/file_entry.h"

#include <limits>
#include <string>

#include "base/json_fields.h"
#include "host_files/host_files.h"

namespace codebox::api {

using nlohmann::json;

json FileEntryToJson(const FileEntry& f) {
  return {{"name", f.name}, {"path", f.path}, {"type", f.type}, {"size", f.size}, {"mode", f.mode}};
}

json FileListToJson(const std::vector<FileEntry>& entries) {
  json out = json::array();
  for (const FileEntry& entry : entries) out.push_back(FileEntryToJson(entry));
  return {{"entries", std::move(out)}};
}

StatusOr<std::vector<FileEntry>> FileListFromJson(const json& j, std::string_view dir) {
  std::string what = "the server's listing of " + host_files::ShowName(dir);
  const json* list = base::JsonFields(j, what).Find("entries");
  if (list == nullptr || !list->is_array()) {
    return ProtocolError(what + ": no \"entries\" list");
  }
  std::vector<FileEntry> entries;
  entries.reserve(list->size());
  std::string parent;  // the directory every path must be in
  for (const json& item : *list) {
    if (!item.is_object()) {
      return ProtocolError(what + ": an entry is a JSON " + std::string(item.type_name()) +
                           ", not an object");
    }
    base::JsonFields f(item, what);
    FileEntry e;
    ASSIGN_OR_RETURN(e.name, f.String("name"));
    // The same check as a local box's listing: the name is the box's.
    RETURN_IF_ERROR(host_files::CheckNameStaysInDirectory(e.name).WithContext(what));
    ASSIGN_OR_RETURN(e.path, f.String("path"));
    bool under =
        e.path.size() > e.name.size() + 1 && e.path.front() == '/' &&
        e.path.compare(e.path.size() - e.name.size() - 1, std::string::npos, "/" + e.name) == 0;
    // "/" lists as "/name": the parent part is then empty.
    if (!under && e.path == "/" + e.name) under = true;
    if (!under) {
      return f.Fault("path", host_files::ShowName(e.path) + " is not the directory + \"/\" + " +
                                 host_files::ShowName(e.name));
    }
    std::string this_parent = e.path.substr(0, e.path.size() - e.name.size() - 1);
    if (entries.empty()) parent = this_parent;
    if (this_parent != parent) {
      return f.Fault("path", host_files::ShowName(e.path) + " is not in " +
                                 host_files::ShowName(parent) + " like the entries before it");
    }
    ASSIGN_OR_RETURN(e.type, f.String("type"));
    if (e.type != "file" && e.type != "dir" && e.type != "symlink" && e.type != "other") {
      return f.Fault("type",
                     "is " + host_files::ShowName(e.type) + ", not file, dir, symlink or other");
    }
    ASSIGN_OR_RETURN(int64_t size, f.Int("size", 0, std::numeric_limits<int64_t>::max(), 0));
    ASSIGN_OR_RETURN(int64_t mode, f.Int("mode", 0, 07777, 0));
    e.size = static_cast<uint64_t>(size);
    e.mode = static_cast<uint32_t>(mode);
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace codebox::api
