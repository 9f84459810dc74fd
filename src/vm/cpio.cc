#include "vm/cpio.h"

#include <cstdio>

namespace codebox::vm {
namespace {

void Pad4(std::string* out) {
  while (out->size() % 4 != 0) out->push_back('\0');
}

}  // namespace

void CpioWriter::AddEntry(std::string_view path, uint32_t mode, std::string_view data,
                          uint32_t rdev_major, uint32_t rdev_minor) {
  // 13 fields of 8 hex digits after the magic; mtime 0 keeps the archive reproducible.
  char header[111];
  std::snprintf(header, sizeof header, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
                next_ino_++, mode, 0u, 0u, S_ISDIR(mode) ? 2u : 1u, 0u,
                static_cast<uint32_t>(data.size()), 0u, 0u, rdev_major, rdev_minor,
                static_cast<uint32_t>(path.size() + 1), 0u);
  out_.append(header, 110);
  out_.append(path);
  out_.push_back('\0');
  Pad4(&out_);  // the name is padded so that header + name is a multiple of 4
  out_.append(data);
  Pad4(&out_);
}

void CpioWriter::AddDirectory(std::string_view path, uint32_t mode) {
  AddEntry(path, S_IFDIR | mode, {}, 0, 0);
}

void CpioWriter::AddFile(std::string_view path, std::string_view data, uint32_t mode) {
  AddEntry(path, S_IFREG | mode, data, 0, 0);
}

void CpioWriter::AddCharDevice(std::string_view path, uint32_t major, uint32_t minor,
                               uint32_t mode) {
  AddEntry(path, S_IFCHR | mode, {}, major, minor);
}

std::string CpioWriter::Finish() {
  AddEntry("TRAILER!!!", 0, {}, 0, 0);
  return std::move(out_);
}

}  // namespace codebox::vm
