// The server's image pulls for a request (image_pulls.h): which caller may pull from where.
#include "server/api_internal.h"
#include "server/image_pulls.h"

namespace codebox::server {

Status EnsureImage(Call& call, const BoxOptions& options) {
  ImagePulls* pulls = call.context.options.pulls;
  if (pulls == nullptr) return Status::Ok();
  // An admin token may pull from any registry (still under the address policy). Only a token
  // marked admin: on a server without tokens every caller is the one tenant "local", which
  // must not make any local client able to pull from anywhere.
  const bool admin = call.caller.admin && call.context.options.tokens_required;
  return pulls->Ensure(options, admin);
}

}  // namespace codebox::server
