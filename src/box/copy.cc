#include "box/copy.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/io.h"

namespace codebox::box {
namespace {

std::string Join(const std::string& dir, const std::string& name) {
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// Rejects names a box could use to climb out of the destination directory.
bool SafeEntryName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

}  // namespace

Status CopyHostToBox(protocol::AgentClient& agent, const std::string& host_path,
                     const std::string& box_path) {
  struct stat st;
  if (::lstat(host_path.c_str(), &st) != 0) return base::ErrnoStatus("copy in: " + host_path);
  if (S_ISREG(st.st_mode)) {
    return agent.WriteFileFromHost(host_path, box_path).WithContext("copy in " + host_path);
  }
  if (!S_ISDIR(st.st_mode)) {
    return InvalidArgument("copy in: " + host_path + " is neither a file nor a directory");
  }
  RETURN_IF_ERROR(agent.MakeDir(box_path, st.st_mode & 07777).WithContext("copy in: mkdir " + box_path));
  if (::access(host_path.c_str(), R_OK | X_OK) != 0) {
    return base::ErrnoStatus("copy in: open directory " + host_path);
  }
  for (const std::string& name : base::ListDirectory(host_path)) {
    std::string child = Join(host_path, name);
    struct stat child_st;
    if (::lstat(child.c_str(), &child_st) != 0 || S_ISLNK(child_st.st_mode)) continue;
    RETURN_IF_ERROR(CopyHostToBox(agent, child, Join(box_path, name)));
  }
  return Status::Ok();
}

Status CopyBoxToHost(protocol::AgentClient& agent, const std::string& box_path,
                     const std::string& host_path) {
  auto entries = agent.ListDir(box_path);
  if (!entries.ok()) {
    // Not a directory (or not there): copy it as a file; that error is the one to report.
    return agent.ReadFileToHost(box_path, host_path).WithContext("copy out " + box_path);
  }
  if (::mkdir(host_path.c_str(), 0755) != 0 && errno != EEXIST) {
    return base::ErrnoStatus("copy out: mkdir " + host_path);
  }
  for (const protocol::DirEntry& entry : *entries) {
    if (!SafeEntryName(entry.name)) {
      return ProtocolError("copy out: box listed an unsafe entry name '" + entry.name + "'");
    }
    if (entry.type != "file" && entry.type != "dir") continue;  // symlinks, devices, fifos
    RETURN_IF_ERROR(CopyBoxToHost(agent, Join(box_path, entry.name), Join(host_path, entry.name)));
  }
  return Status::Ok();
}

}  // namespace codebox::box
