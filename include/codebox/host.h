// What this host can do for codebox: which drivers run and how, which limits a box gets here
// (and why not the others), where images are looked up and which are built. `codebox doctor`
// prints it; Python has it as codebox.describe_host().
#ifndef CODEBOX_HOST_H_
#define CODEBOX_HOST_H_

#include <string>
#include <vector>

#include "codebox/options.h"

namespace codebox {

struct HostJail {
  bool usable = false;
  std::string detail;            // how it runs, or why it cannot
  bool root = false;             // effective uid 0
  bool user_namespaces = false;  // the kernel lets this user create one
  std::string user_namespaces_detail;
  // Cgroup hierarchy a jail box's limits would use: 2, 1, or 0 (none writable here).
  int cgroup_version = 0;
  std::vector<std::string> cgroup_controllers;  // usable here: "memory", "pids", "cpu"
  std::vector<std::string> cgroup_missing;      // "pids: no write access to cgroup ... (why)"
  std::string cgroup_hint;                      // how to get the missing ones; empty if none
};

struct HostVm {
  bool kvm_usable = false;
  std::string kvm_detail;  // why not, when not
  bool tcg_usable = false;
  std::string tcg_detail;
  std::string qemu;  // path of qemu-system-x86_64; empty when not found
};

struct HostLimit {
  std::string name;  // "memory", "processes", "cpu", "disk", "open files", "network"
  bool enforced = false;
  std::string detail;  // how ("cgroup v1, no swap"), or why not and what is used instead
};

struct HostStore {
  std::string path;
  std::string kind;  // "explicit", "user" (searched first) or "system" (/var/lib/codebox)
  bool writable = false;
};

struct HostImage {
  std::string name;    // a recipe's name, or an OCI image's reference ("python:3.12-slim")
  bool built = false;  // a build of the current recipe (or the pulled image) is in a store
  std::string id;      // that build's id
  std::string store;   // the store it is in
  std::string detail;  // when not built: why, and the command that builds it for this user
  std::string digest;  // OCI images: the manifest digest it was pulled at; else empty
};

struct HostDescription {
  HostJail jail;
  HostVm vm;
  bool driver_usable = false;     // `options.driver` (auto: some driver) can run here
  std::string driver;             // what it resolves to ("jail", "vm"), empty when none
  std::string driver_reason;      // why that one, or why none
  std::vector<HostLimit> limits;  // of a box with `options` on that driver
  std::vector<HostStore> stores;  // in search order
  std::vector<HostImage> images;  // one per recipe
};

// Probes the host (starts no box; the jail probe runs the codebox-jail helper once). The
// limits are what a box with `options` would get on the driver `options.driver` resolves to.
HostDescription DescribeHost(const BoxOptions& options = BoxOptions());

}  // namespace codebox

#endif  // CODEBOX_HOST_H_
