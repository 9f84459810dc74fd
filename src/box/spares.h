// Prestarted boxes (BoxOptions::prestart): one never-used spare per distinct configuration,
// started in the background after each take, so Box::Create need not wait for a start. For the
// jail driver a spare is a started jail; for the vm driver, a machine restored from its
// template and left paused (vm::Machine::StartParked), which runs once taken.
#ifndef CODEBOX_BOX_SPARES_H_
#define CODEBOX_BOX_SPARES_H_

#include <memory>

#include "codebox/options.h"
#include "codebox/status.h"
#include "jail/jail.h"
#include "vm/vm.h"

namespace codebox::box {

// A started jail for `config` (made from `options`): the spare if one was started for equal
// options, else a new one; either way a spare for the next call is started in the background.
// Thread-safe.
StatusOr<std::unique_ptr<jail::Jail>> TakePrestartedJail(const BoxOptions& options,
                                                         const jail::JailConfig& config);

// The same for the vm driver: a running machine for `config`, resumed from the parked spare when
// there is one.
StatusOr<std::unique_ptr<vm::Machine>> TakePrestartedMachine(const BoxOptions& options,
                                                             const vm::VmConfig& config);

// Destroys every spare of both drivers (waiting for those still starting). Tests use it to
// count leftovers.
void DestroyPrestartedJails();

}  // namespace codebox::box

#endif  // CODEBOX_BOX_SPARES_H_
