// The image pulls `codebox serve` makes for its clients (docs/images.md, "Pulls for a server's
// clients"). A client's box may name an OCI image the store lacks; the server pulls it only
//   * from a registry its operator allows (--allow-registry HOST[:PORT]; none by default), or
//     for an admin (an admin token), or for an image the operator named (--pool, --image);
//   * through a network namespace whose only way out is the host's egress proxy, under the
//     address policy of box egress (net/confined_network.h, net/egress_policy.h): no loopback,
//     private, link-local (cloud metadata), carrier-grade NAT, multicast or reserved address
//     unless the operator names it (--allow-registry-address ADDR[/PREFIX]), for every
//     connection skopeo makes (redirects to blob hosts included), each address judged right
//     before the host connects to it;
//   * with an error that says "not allowed", "not found" or "could not be pulled", never what
//     the network answered (that goes to the server's log).
// Images in the store work whatever their registry. The CLI and the library pull as before.
#ifndef CODEBOX_SERVER_IMAGE_PULLS_H_
#define CODEBOX_SERVER_IMAGE_PULLS_H_

#include <string>
#include <string_view>
#include <vector>

#include "codebox/options.h"
#include "codebox/status.h"
#include "image/oci_reference.h"
#include "image/store.h"
#include "net/egress_policy.h"

namespace codebox::server {

struct PullPolicy {
  // --allow-registry: registries a pull for any client may use. A pattern without a port
  // allows the registry's default port (a reference without one, :443 or :80).
  std::vector<net::HostPattern> registries;
  // --allow-registry-address: addresses of a forbidden class that a pull may reach anyway.
  std::vector<net::AddressRange> addresses;
  // The images of --pool specs and of the box defaults (serve --image): the operator named
  // them, so they are pulled whatever their registry (still under the address policy).
  std::vector<std::string> operator_images;
};

// A --allow-registry value: HOST, HOST:PORT, [V6]:PORT, *.DOMAIN; errors name the flag.
StatusOr<net::HostPattern> ParseAllowedRegistry(std::string_view text);
// A --allow-registry-address value: ADDR or ADDR/PREFIX; errors name the flag.
StatusOr<net::AddressRange> ParseAllowedRegistryAddress(std::string_view text);

// Whether this server may pull `ref` for a client, from the reference's text alone (no
// network). PermissionDenied, saying how the operator allows it (--allow-registry,
// --allow-registry-address) or pulls the image beforehand (codebox image pull), when
//   * the registry is not one of policy.registries and the client is not `admin`, or
//   * the registry is an address (or "localhost") the address policy refuses, for anyone.
Status CheckServerPull(const PullPolicy& policy, const image::ImageReference& ref, bool admin);

// The pulls of one server. Thread-safe.
class ImagePulls {
 public:
  // Installs itself as the first-use pull of box starts in this process (box/image_lookup.h)
  // until destroyed: a box start that finds no image pulls it as Pull(options, false) would,
  // or as an operator's image.
  explicit ImagePulls(PullPolicy policy);
  ~ImagePulls();
  ImagePulls(const ImagePulls&) = delete;
  ImagePulls& operator=(const ImagePulls&) = delete;

  const PullPolicy& policy() const { return policy_; }

  // Before a client's box of options.image starts: OK when a store has the image (whatever
  // its registry), when it is not an OCI reference (a recipe: the box start says what is
  // missing), or once it is pulled here; otherwise CheckServerPull's refusal or the pull's
  // error. As non-root, the check only (the box start then says how to pull as root).
  Status Ensure(const BoxOptions& options, bool admin);

  // Pulls options.image into the first store of options.home, as above.
  StatusOr<image::ImageInfo> Pull(const BoxOptions& options, bool admin);

 private:
  bool IsOperatorImage(const std::string& image) const;

  PullPolicy policy_;
};

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_IMAGE_PULLS_H_
