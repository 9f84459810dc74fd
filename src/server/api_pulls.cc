// The server's image pulls for a request (image_pulls.h): which caller may pull from where.
#include "server/api_internal.h"
#include "server/image_pulls.h"

namespace codebox::server {

Status EnsureImage(Call& call, const BoxOptions& options) {
  ImagePulls* pulls = call.context.options.pulls;
  if (pulls == nullptr) return Status::Ok();
  // An admin token may pull from any registry (still under the address policy). Tokens do not
  // say who is an admin yet: every caller is a client.
  const bool admin = false;
  return pulls->Ensure(options, admin);
}

}  // namespace codebox::server
