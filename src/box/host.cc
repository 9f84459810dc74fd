// DescribeHost: the drivers' probes, the cgroup plan a jail would get, the image stores, put
// together for `codebox doctor` and codebox.describe_host(). Starts no box.
#include "codebox/host.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "base/io.h"
#include "base/paths.h"
#include "box/backend.h"
#include "image/oci_reference.h"
#include "image/store.h"
#include "jail/cgroups.h"
#include "jail/jail.h"
#include "vm/accel.h"
#include "vm/guest_limits.h"
#include "vm/vm.h"

namespace codebox {
namespace {

// -1 when the sysctl is absent (the kernel has no such knob).
int Sysctl(const char* path) {
  auto v = base::ReadFile(path);
  return v.ok() ? std::atoi(v->c_str()) : -1;
}

void DescribeUserNamespaces(HostJail& jail) {
  int max = Sysctl("/proc/sys/user/max_user_namespaces");
  if (max == 0) {
    jail.user_namespaces_detail = "disabled: user.max_user_namespaces = 0";
  } else if (!jail.root && Sysctl("/proc/sys/kernel/unprivileged_userns_clone") == 0) {
    jail.user_namespaces_detail =
        "disabled for non-root users: kernel.unprivileged_userns_clone = 0 (an admin sets it "
        "to 1, or run as root)";
  } else if (!jail.root && Sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") > 0) {
    jail.user_namespaces_detail =
        "restricted by AppArmor: kernel.apparmor_restrict_unprivileged_userns = 1 (an admin "
        "sets it to 0 or adds an AppArmor profile allowing userns for codebox-jail)";
  } else {
    jail.user_namespaces = true;
    jail.user_namespaces_detail =
        std::string(jail.root ? "as root" : "allowed for non-root users") +
        (max > 0 ? " (user.max_user_namespaces = " + std::to_string(max) + ")" : "");
  }
}

bool HostHasCgroup2Root() { return ::access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0; }

std::string CgroupHint(const HostJail& jail) {
  if (jail.cgroup_missing.empty()) return "";
  if (jail.root) {
    return "even root cannot create cgroups here: check that /sys/fs/cgroup is mounted "
           "read-write (in a container, that the container may manage its cgroups)";
  }
  if (HostHasCgroup2Root()) {
    return "run codebox in a cgroup delegated to you: systemd-run --user --scope -p "
           "Delegate=yes codebox ... (systemd's user manager delegates memory and pids; for cpu "
           "an admin adds Delegate=cpu cpuset io memory pids in a drop-in for user@.service), "
           "or run as root";
  }
  return "this host uses cgroup v1, which has no delegation to non-root users: without root "
         "a box's total memory and cpu share are unbounded and processes are bounded by "
         "RLIMIT_NPROC only. To get them: run as root; or have an admin make cgroups you own "
         "(for c in memory pids cpu: sudo mkdir /sys/fs/cgroup/$c/codebox-$USER; sudo chown -R "
         "$USER /sys/fs/cgroup/$c/codebox-$USER) and start codebox from a shell moved into them "
         "(echo $$ > /sys/fs/cgroup/$c/codebox-$USER/cgroup.procs); or boot with cgroup v2 "
         "(systemd.unified_cgroup_hierarchy=1) and use systemd-run --user --scope -p Delegate=yes";
}

void DescribeCgroups(HostJail& jail) {
  jail::cgroups::Plan plan = jail::cgroups::MakePlan("probe");
  jail.cgroup_version = plan.version;
  for (const auto& dir : plan.dirs) {
    if (dir.controller == "unified") {
      jail.cgroup_controllers = {"memory", "pids", "cpu"};  // v2 plans need all three
    } else {
      jail.cgroup_controllers.push_back(dir.controller);
    }
  }
  jail.cgroup_missing = plan.unavailable;
  jail.cgroup_hint = CgroupHint(jail);
}

bool Has(const std::vector<std::string>& v, const char* s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string MissingReason(const HostJail& jail, const std::string& controller) {
  for (const std::string& m : jail.cgroup_missing) {
    if (m.starts_with(controller + ":") || m.starts_with("cgroup v2")) return m;
  }
  return controller + ": no cgroup";
}

std::vector<HostLimit> JailLimits(const HostJail& jail, const BoxOptions& o) {
  std::string v = "cgroup v" + std::to_string(jail.cgroup_version);
  std::string mib = std::to_string(o.memory_mib) + " MiB";
  std::vector<HostLimit> out;
  if (Has(jail.cgroup_controllers, "memory")) {
    out.push_back({"memory", true, mib + " in total (" + v + ", no swap, OOM kills counted)"});
  } else {
    out.push_back({"memory", false,
                   "no total limit and no OOM accounting (" + MissingReason(jail, "memory") +
                       "); each process gets only " + mib + " of address space (RLIMIT_AS)"});
  }
  std::string procs = std::to_string(o.max_processes) + " processes";
  out.push_back({"processes", true,
                 Has(jail.cgroup_controllers, "pids")
                     ? procs + " (" + v + " pids, and RLIMIT_NPROC)"
                     : procs + " (RLIMIT_NPROC of the box root's uid only; " +
                           MissingReason(jail, "pids") + ")"});
  if (Has(jail.cgroup_controllers, "cpu")) {
    char cpus[32];
    std::snprintf(cpus, sizeof cpus, "%.2f", o.cpus);
    out.push_back({"cpu", true, std::string(cpus) + " cpus (" + v + " cfs quota)"});
  } else {
    out.push_back({"cpu", false, "no cpu share (" + MissingReason(jail, "cpu") + ")"});
  }
  out.push_back({"disk", true, std::to_string(o.disk_mib) + " MiB writable tmpfs"});
  out.push_back(
      {"open files", true, std::to_string(o.max_open_files) + " per process (RLIMIT_NOFILE)"});
  out.push_back({"network", true, "none (own network namespace, loopback only)"});
  return out;
}

std::vector<HostLimit> VmLimits(const BoxOptions& o) {
  return {
      {"memory", true,
       std::to_string(o.memory_mib) + " MiB guest RAM; programs " +
           std::to_string(vm::GuestExecMemoryBytes(o.memory_mib) >> 20) +
           " MiB of it (guest cgroup v2, OOM kills counted)"},
      {"processes", true, std::to_string(o.max_processes) + " processes (guest cgroup v2 pids)"},
      {"cpu", true, std::to_string(static_cast<int>(std::max(1.0, o.cpus))) + " vCPUs"},
      {"disk", true, std::to_string(o.disk_mib) + " MiB guest tmpfs overlay"},
      {"open files", true, std::to_string(o.max_open_files) + " per process (in the guest)"},
      {"network", true, "none (no network device)"},
  };
}

}  // namespace

HostDescription DescribeHost(const BoxOptions& options) {
  HostDescription host;
  HostJail& jail = host.jail;
  jail.root = ::geteuid() == 0;
  Status jail_ok = jail::ProbeJailSupport();
  jail.usable = jail_ok.ok();
  jail.detail = jail_ok.ok() ? std::string("namespaces, seccomp, cgroups/rlimits") +
                                   (jail.root ? " (as root)" : " (as a non-root user)")
                             : jail_ok.message();
  DescribeUserNamespaces(jail);
  DescribeCgroups(jail);

  vm::AcceleratorProbe accel = vm::ProbeAccelerators();
  host.vm.kvm_usable = accel.kvm_usable;
  host.vm.kvm_detail = accel.kvm_usable ? "hardware virtualization" : accel.kvm_reason;
  host.vm.tcg_usable = accel.tcg_usable;
  host.vm.tcg_detail =
      accel.tcg_usable ? "software emulation: slow, only with allow_emulation" : accel.tcg_reason;
  host.vm.qemu = vm::QemuBinary();

  auto choice = box::ChooseDriver(options);
  host.driver_usable = choice.ok();
  if (choice.ok()) {
    host.driver = choice->kind == DriverKind::kVm ? "vm" : "jail";
    host.driver_reason = choice->reason;
    host.limits = choice->kind == DriverKind::kVm ? VmLimits(options) : JailLimits(jail, options);
  } else {
    host.driver_reason = choice.status().message();
  }

  std::vector<base::ImageStore> stores = base::ImageStores(options.home);
  for (const base::ImageStore& s : stores) {
    // The first store is the one codebox writes; it may not exist yet (made on first build).
    std::string probe = s.path;
    while (::access(probe.c_str(), F_OK) != 0 && probe.find('/', 1) != std::string::npos) {
      probe = probe.substr(0, probe.rfind('/'));
    }
    host.stores.push_back(
        {s.path, base::StoreKindName(s.kind), ::access(probe.c_str(), W_OK) == 0});
  }
  for (const std::string& name : image::ListRecipes()) {
    HostImage image;
    image.name = name;
    auto found = image::FindImage(stores, name);
    image.built = found.ok();
    if (found.ok()) {
      image.id = found->id;
      image.store = found->store;
    } else {
      image.detail = found.status().message();
    }
    host.images.push_back(std::move(image));
  }
  for (const image::ImageInfo& info : image::ListImages(stores)) {
    if (info.source != "oci") continue;
    auto ref = image::ParseImageReference(info.reference);
    host.images.push_back(
        {ref.ok() ? ref->Familiar() : info.reference, true, info.id, info.store, "", info.digest});
  }
  return host;
}

}  // namespace codebox
