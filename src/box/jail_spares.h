// Prestarted jails (BoxOptions::prestart): one never-used spare per distinct configuration,
// started in the background after each take, so Box::Create need not wait for a jail start.
#ifndef CODEBOX_BOX_JAIL_SPARES_H_
#define CODEBOX_BOX_JAIL_SPARES_H_

#include <memory>

#include "codebox/options.h"
#include "codebox/status.h"
#include "jail/jail.h"

namespace codebox::box {

// A started jail for `config` (made from `options`): the spare if one was started for equal
// options, else a new one; either way a spare for the next call is started in the background.
// Thread-safe.
StatusOr<std::unique_ptr<jail::Jail>> TakePrestartedJail(const BoxOptions& options,
                                                         const jail::JailConfig& config);

// Destroys every spare (waiting for those still starting). Tests use it to count leftovers.
void DestroyPrestartedJails();

}  // namespace codebox::box

#endif  // CODEBOX_BOX_JAIL_SPARES_H_
