// The server's image pulls for a request (image_pulls.h): which caller may pull from where.
#include "server/api_internal.h"
#include "server/image_pulls.h"

namespace codebox::server {

Status EnsureImage(Call& call, const BoxOptions& options) {
  ImagePulls* pulls = call.context.options.pulls;
  if (pulls == nullptr) return Status::Ok();
  // An admin token may pull from any registry (still under the address policy). Not wired
  // yet: the lead decides whether call.caller.admin is it (without --token-file every caller
  // is the admin tenant "local", which would let any local client pull from any registry).
  const bool admin = false;
  return pulls->Ensure(options, admin);
}

}  // namespace codebox::server
