// The guest's initramfs, assembled by codebox: the static codebox-agent as /init, the
// modules it loads (plain .ko, dependencies first) under /modules with /modules/order
// listing the load order, and the mount points the agent's guest setup uses.
#ifndef CODEBOX_VM_INITRAMFS_H_
#define CODEBOX_VM_INITRAMFS_H_

#include <string>

#include "codebox/status.h"
#include "vm/kernel.h"

namespace codebox::vm {

// The archive bytes (exposed for tests).
StatusOr<std::string> BuildInitramfs(const Kernel& kernel, const std::string& agent_path);

// <home>/initramfs/<release>-<agent hash>.cpio, built once per kernel and agent binary.
StatusOr<std::string> EnsureInitramfs(const std::string& home, const Kernel& kernel,
                                      const std::string& agent_path);

}  // namespace codebox::vm

#endif  // CODEBOX_VM_INITRAMFS_H_
