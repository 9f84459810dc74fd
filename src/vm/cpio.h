// Writer for the "newc" cpio format, the one the kernel unpacks as an initramfs
// (Documentation/driver-api/early-userspace/buffer-format.rst).
#ifndef CODEBOX_VM_CPIO_H_
#define CODEBOX_VM_CPIO_H_

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace codebox::vm {

class CpioWriter {
 public:
  void AddDirectory(std::string_view path, uint32_t mode = 0755);
  void AddFile(std::string_view path, std::string_view data, uint32_t mode = 0644);
  void AddCharDevice(std::string_view path, uint32_t major, uint32_t minor, uint32_t mode = 0600);
  // Appends the trailer and returns the archive; the writer is spent afterwards.
  std::string Finish();

 private:
  void AddEntry(std::string_view path, uint32_t mode, std::string_view data, uint32_t rdev_major,
                uint32_t rdev_minor);
  std::string out_;
  uint32_t next_ino_ = 1;
};

}  // namespace codebox::vm

#endif  // CODEBOX_VM_CPIO_H_
