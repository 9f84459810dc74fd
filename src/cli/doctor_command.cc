// `codebox doctor`: which drivers can run here, which limits a box gets, and why not.
#include <cstdio>
#include <string>

#include "base/paths.h"
#include "base/text.h"
#include "box/egress.h"
#include "box/leftovers.h"
#include "cli/box_flags.h"
#include "cli/commands.h"
#include "codebox/box.h"
#include "codebox/host.h"
#include "vm/snapshot.h"

namespace codebox::cli {
namespace {

void Line(const char* what, bool ok, const std::string& detail) {
  std::printf("  %-14s %-4s %s\n", what, ok ? "yes" : "no", detail.c_str());
}

}  // namespace

int DoctorCommand(const std::vector<std::string>& args) {
  BoxOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::fputs(R"(usage: codebox doctor [box options]

Reports which isolation drivers run on this host, which limits and network a
box gets here, and why anything is missing.
Exit status: 0 a box started here; 2 a bad option; 125 no box can start.
)",
                 stdout);
      return 0;
    }
    auto parsed = ParseBoxFlag(args, &i, &options);
    if (!parsed.ok() || !*parsed) {
      PrintError("doctor", parsed.ok()
                               ? InvalidArgument("unknown option " + args[i] + BoxFlagHint(args[i]))
                               : parsed.status());
      return kExitUsage;
    }
  }
  if (Status st = ValidateForCli(options); !st.ok()) {
    PrintError("doctor", st);
    return kExitUsage;
  }

  const HostDescription host = DescribeHost(options);
  std::printf("drivers:\n");
  Line("vm (kvm)", host.vm.kvm_usable, host.vm.kvm_detail);
  Line("vm (tcg)", host.vm.tcg_usable,
       host.vm.tcg_usable ? host.vm.tcg_detail + " (qemu: " + host.vm.qemu + ")"
                          : host.vm.tcg_detail);
  {
    // vm boxes restore from templates (docs/security.md, "vm templates"); `codebox image ls`
    // lists them one by one.
    std::vector<vm::TemplateInfo> templates = vm::ListTemplates();
    uint64_t bytes = 0;
    for (const vm::TemplateInfo& t : templates) bytes += t.memory_bytes_used;
    std::printf("  %-13s      %zu in %s (%s in RAM); the first vm box of each kind makes one\n",
                "  templates", templates.size(), vm::TemplateRoot().c_str(),
                base::FormatSize(bytes).c_str());
  }
  Line("jail", host.jail.usable, host.jail.detail);
  Line("  user ns", host.jail.user_namespaces, host.jail.user_namespaces_detail);
  std::string controllers;
  for (const std::string& c : host.jail.cgroup_controllers) controllers += " " + c;
  Line("  cgroups", !host.jail.cgroup_controllers.empty(),
       host.jail.cgroup_version == 0
           ? "none usable by this user"
           : "v" + std::to_string(host.jail.cgroup_version) + ":" + controllers);
  for (const std::string& m : host.jail.cgroup_missing) std::printf("  %-19s %s\n", "", m.c_str());
  if (!host.jail.cgroup_hint.empty()) {
    std::printf("  %-19s how to get them: %s\n", "", host.jail.cgroup_hint.c_str());
  }
  std::string picks = std::string(DriverKindName(options.driver)) + " picks:";
  std::printf("  %-19s %s\n", picks.c_str(), host.driver_reason.c_str());

  std::printf("\nlimits a box would get here (--driver %s):\n",
              std::string(DriverKindName(options.driver)).c_str());
  for (const HostLimit& l : host.limits) Line(l.name.c_str(), l.enforced, l.detail);

  std::printf(
      "\nnetwork of a box (--network, --allow-host; docs/security.md, \"Network\"):\n"
      "  none           the default: no route, no DNS, nothing listens for it\n"
      "  allow          only the hosts of --allow-host (giving one implies allow), through an\n"
      "                 HTTP proxy in the box (HTTP_PROXY, HTTPS_PROXY); the host resolves each\n"
      "                 name and refuses internal addresses unless allowed as a literal\n"
      "  open           any public address, through the same proxy; only when asked for by name\n"
      "  this request:  %s\n",
      box::NetworkDescription(options).c_str());

  std::printf("\nimage stores, in search order:\n");
  for (const HostStore& s : host.stores) {
    std::printf("  %-14s %s%s\n", s.kind.c_str(), s.path.c_str(),
                s.writable ? "" : " (read-only for you)");
  }
  std::printf("\nimages:\n");
  for (const HostImage& i : host.images) {
    std::string oci = i.digest.empty() ? "" : " (oci " + i.digest.substr(0, 19) + ")";
    Line(i.name.c_str(), i.built, i.built ? i.id + " in " + i.store + oci : i.detail);
  }
  const std::string home = base::CodeboxHome(options.home);

  // Before Box::Create below, which removes leftovers itself (once per process).
  box::LeftoverOptions leftovers;
  leftovers.home = home;
  leftovers.dry_run = true;
  box::LeftoverReport found = box::CollectLeftovers(leftovers);
  std::printf(
      "\nleftovers of killed codebox processes: %zu (`codebox gc` removes them, and so does\n"
      "  the next box start; a box that ends normally cleans up after itself)\n",
      found.removed.size());

  std::printf("\na box started here reports (--driver %s):\n",
              std::string(DriverKindName(options.driver)).c_str());
  auto box = Box::Create(options);
  if (!box.ok()) {
    std::printf("  cannot start one: %s\n", box.status().message().c_str());
    return kExitCodeboxError;
  }
  std::printf("  driver:        %s\n", (*box)->info().driver.c_str());
  std::printf("  network:       %s\n", (*box)->info().network.c_str());
  std::printf("  user:          %s\n", (*box)->info().user.c_str());
  for (const std::string& l : (*box)->info().limits)
    std::printf("  enforced:      %s\n", l.c_str());
  for (const std::string& l : (*box)->info().limits_not_enforced) {
    std::printf("  NOT enforced:  %s\n", l.c_str());
  }
  return 0;
}

}  // namespace codebox::cli
