// The agent's file operations: atomic chunked writes, streamed reads, listing, mkdir.
// Errors carry the path and map to the protocol's error codes via ErrorCodeName().
#ifndef CODEBOX_AGENT_FILES_H_
#define CODEBOX_AGENT_FILES_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/unique_fd.h"
#include "codebox/status.h"
#include "protocol/message.h"
#include "protocol/messages.h"

namespace codebox::agent {

// The protocol's "code" for a failed request: not_found, invalid_argument, io_error, ...
std::string_view ErrorCodeName(const Status& status);

// Writes a file under a temporary name beside its target and renames it into place on
// Finish(), so a partial file never appears; the destructor removes an unfinished temp file.
class FileWriter {
 public:
  // With `owner` the file, and the parents made for it, belong to uid:gid (a vm's agent is
  // real root; a jail's works on files as the box's user already, and changes nothing).
  static StatusOr<FileWriter> Open(const std::string& path, uint32_t mode, bool parents,
                                   const std::optional<protocol::msg::User>& owner = std::nullopt);
  FileWriter(FileWriter&&) = default;
  FileWriter& operator=(FileWriter&&) = default;
  ~FileWriter();

  Status Write(std::string_view chunk);
  Status Finish();

 private:
  FileWriter() = default;
  std::string path_;
  std::string temp_path_;
  base::UniqueFd fd_;
};

struct OpenedFile {
  base::UniqueFd fd;
  uint64_t size = 0;
  uint32_t mode = 0;
};
// Opens a regular file for a streamed read_file.
StatusOr<OpenedFile> OpenForRead(const std::string& path);

// {"event":"entries","entries":[...]} for list_dir.
StatusOr<protocol::Json> ListDir(const std::string& path);
// mkdir, with parents like `mkdir -p` (an existing directory is then not an error). Each
// directory made now is made to belong to `owner` (ChownDir), when given.
Status MakeDir(const std::string& path, uint32_t mode, bool parents,
               const std::optional<protocol::msg::User>& owner = std::nullopt);
// Makes the directory at `path` belong to uid:gid (mkdir's "owner"). The last component is
// opened without following a symlink, then changed through the fd; a directory that already
// has that owner is left alone (so a jail's agent, which holds no CAP_CHOWN, succeeds on the
// workdir its supervisor already gave the user).
Status ChownDir(const std::string& path, uint32_t uid, uint32_t gid);
// Removes a file, or a directory with everything in it, like `rm -rf` but: a symlink is
// removed, never followed (the final component and every entry of the tree); a directory on
// another file system (a mount point) is not descended into; "/" and "" are refused; an
// absent path is kNotFound.
Status Remove(const std::string& path);

}  // namespace codebox::agent

#endif  // CODEBOX_AGENT_FILES_H_
