#include "jail/agent_image.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>

#include "base/io.h"

namespace codebox::jail {

using base::ErrnoStatus;
using base::UniqueFd;

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
#ifndef F_SEAL_EXEC
#define F_SEAL_EXEC 0x0020
#endif

// Execute-only (no read bit for anyone but a process with CAP_DAC_OVERRIDE): the kernel then
// starts it non-dumpable itself.
StatusOr<UniqueFd> SealedCopy(const std::string& path) {
  UniqueFd src(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!src.valid()) return ErrnoStatus("open " + path);
  struct stat st {};
  if (::fstat(src.get(), &st) != 0) return ErrnoStatus("stat " + path);
  if (!S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > (256 << 20)) {
    return InvalidArgument(path + " is not a plausible agent binary");
  }
  const unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
  int fd = ::memfd_create("codebox-agent", flags | MFD_EXEC);
  if (fd < 0 && errno == EINVAL) fd = ::memfd_create("codebox-agent", flags);  // before 6.3
  if (fd < 0) return ErrnoStatus("memfd_create");
  UniqueFd copy(fd);
  off_t offset = 0;
  while (offset < st.st_size) {
    ssize_t n =
        ::sendfile(copy.get(), src.get(), &offset, static_cast<size_t>(st.st_size - offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? ErrnoStatus("copy " + path) : IoError(path + " shrank while copied");
  }
  if (::fchmod(copy.get(), 0111) != 0) return ErrnoStatus("chmod agent copy");
  int seals = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
  if (::fcntl(copy.get(), F_ADD_SEALS, seals | F_SEAL_EXEC) != 0 &&
      ::fcntl(copy.get(), F_ADD_SEALS, seals) != 0) {  // F_SEAL_EXEC: Linux 6.3+
    return ErrnoStatus("seal agent copy");
  }
  return copy;
}

StatusOr<int> SharedAgentImage(const std::string& path) {
  static std::mutex mu;
  static auto* images = new std::map<std::string, UniqueFd>();  // never freed: lives with us
  std::lock_guard<std::mutex> lock(mu);
  auto it = images->find(path);
  if (it == images->end()) {
    ASSIGN_OR_RETURN(UniqueFd fd, SealedCopy(path));
    it = images->emplace(path, std::move(fd)).first;
  }
  return it->second.get();
}

}  // namespace codebox::jail
