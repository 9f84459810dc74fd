// vm templates: one booted machine saved at "agent ready", from which boxes are restored
// instead of booted. A template is two files in a tmpfs directory named by its key:
//   memory   the guest's RAM (the template machine mapped it shared); clones map it private
//   state    QEMU's device state, saved with x-ignore-shared (so without the RAM)
//   meta     what it was made from, and checksums of both files
// The key hashes everything the saved state depends on: QEMU's binary, the kernel,
// initramfs (so the agent build) and image disk files, and the machine's arguments (memory,
// cpus, disk, accelerator). Any change gives another key, so a template is never modified
// after it is saved: it is used as it is, or removed and made anew.
#ifndef CODEBOX_VM_SNAPSHOT_H_
#define CODEBOX_VM_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "codebox/status.h"
#include "vm/qemu.h"

namespace codebox::vm {

// $CODEBOX_TEMPLATE_DIR, else /dev/shm/codebox-templates: a tmpfs, so a clone's page faults
// are served from memory (and the templates go with a reboot, as QEMU's state would).
std::string TemplateRoot();

struct TemplateInfo {
  std::string key;  // 16 hex digits; the directory's name
  std::string dir;
  std::string home;        // the codebox store it was made for
  std::string image_tree;  // the image's rootfs tree
  std::string accel;       // "kvm" or "tcg"
  uint64_t memory_mib = 0;
  uint32_t cpus = 0;
  uint64_t disk_mib = 0;
  int64_t created_unix = 0;
  uint64_t memory_bytes_used = 0;  // the memory file's allocated bytes (it is sparse)
  uint64_t state_bytes = 0;
  std::string memory_checksum;  // HashSparseFileHex of each, when saved
  std::string state_checksum;
};

// The key of the template for this launch (its paths to kernel, initramfs and disk set).
StatusOr<std::string> TemplateKey(const QemuLaunch& launch);

// The template saved under `key`, if there is one and its files are whole (sizes and the
// state file's checksum as saved; the memory file is too big to hash on every start, see
// VerifyTemplate). kNotFound when there is none; kDataLoss when it is damaged.
StatusOr<TemplateInfo> FindTemplate(const std::string& key);

// Every template under TemplateRoot() (damaged ones too, so they can be removed).
std::vector<TemplateInfo> ListTemplates();

// Hashes both files again and compares with the checksums saved: kDataLoss when they differ.
Status VerifyTemplate(const TemplateInfo& info);

// Removes templates whose image tree is gone (a test's, a removed image's), half-made ones
// older than an hour (their maker was killed), and the least recently used past
// kMaxTemplates (a new agent or kernel build makes new keys; the old templates would stay in
// RAM otherwise). Called whenever a template is made.
inline constexpr size_t kMaxTemplates = 8;
void PruneTemplates();

// Marks a template as just used (its directory's mtime), for PruneTemplates.
void TouchTemplate(const TemplateInfo& info);

// Removes a template's directory. Clones running from it keep their mapping.
Status RemoveTemplate(const std::string& key);

// Writes meta for a template whose memory and state files are in `dir`, and renames `dir`
// to its key's place (another process may have won the race: then `dir` is removed and the
// other one is kept).
Status CommitTemplate(const std::string& dir, TemplateInfo info);

}  // namespace codebox::vm

#endif  // CODEBOX_VM_SNAPSHOT_H_
