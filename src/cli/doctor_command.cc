// `codebox doctor`: which drivers can run here, which limits a box gets, and why not.
#include <cstdio>

#include "base/paths.h"
#include "box/backend.h"
#include "box/leftovers.h"
#include "cli/box_flags.h"
#include "cli/commands.h"
#include "codebox/box.h"
#include "image/store.h"
#include "jail/jail.h"
#include "vm/vm.h"

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
      std::puts("usage: codebox doctor [--image NAME]\n\nReports which isolation drivers run on "
                "this host, which limits a box gets here, and why anything is missing.");
      return 0;
    }
    auto parsed = ParseBoxFlag(args, &i, &options);
    if (!parsed.ok() || !*parsed) {
      PrintError("doctor", parsed.ok() ? InvalidArgument("unknown option " + args[i]) : parsed.status());
      return kExitCodeboxError;
    }
  }

  std::printf("drivers:\n");
  vm::AcceleratorProbe accel = vm::ProbeAccelerators();
  Line("vm (kvm)", accel.kvm_usable, accel.kvm_usable ? "hardware virtualization" : accel.kvm_reason);
  Line("vm (tcg)", accel.tcg_usable,
       accel.tcg_usable ? "software emulation: slow, only with --allow-emulation" : accel.tcg_reason);
  Status jail = jail::ProbeJailSupport();
  Line("jail", jail.ok(), jail.ok() ? "namespaces, seccomp, cgroups/rlimits" : jail.message());
  BoxOptions auto_options = options;
  auto_options.driver = DriverKind::kAuto;
  auto choice = box::ChooseDriver(auto_options);
  std::printf("  auto picks:    %s\n",
              choice.ok() ? choice->reason.c_str() : choice.status().message().c_str());

  std::string home = base::CodeboxHome(options.home);
  std::printf("\nimages (store %s):\n", home.c_str());
  for (const std::string& name : image::ListRecipes()) {
    auto found = image::FindImage(home, name);
    Line(name.c_str(), found.ok(), found.ok() ? found->id : "not built: codebox image build " + name);
  }

  // Before Box::Create below, which removes leftovers itself (once per process).
  box::LeftoverOptions leftovers;
  leftovers.home = home;
  leftovers.dry_run = true;
  box::LeftoverReport found = box::CollectLeftovers(leftovers);
  std::printf(
      "\nleftovers of killed codebox processes: %zu (`codebox gc` removes them, and so does\n"
      "  the next box start; a box that ends normally cleans up after itself)\n",
      found.removed.size());

  std::printf("\nlimits of a box here (--driver %s):\n", std::string(DriverKindName(options.driver)).c_str());
  auto box = Box::Create(options);
  if (!box.ok()) {
    std::printf("  cannot start one: %s\n", box.status().message().c_str());
    return 1;
  }
  std::printf("  driver:        %s\n", (*box)->info().driver.c_str());
  for (const std::string& l : (*box)->info().limits) std::printf("  enforced:      %s\n", l.c_str());
  for (const std::string& l : (*box)->info().limits_not_enforced) {
    std::printf("  NOT enforced:  %s\n", l.c_str());
  }
  return 0;
}

}  // namespace codebox::cli
