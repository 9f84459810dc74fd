// OCI image references ("python:3.12-slim", "ghcr.io/org/app@sha256:..."), as Docker and the
// distribution spec write them, normalised the way docker does: docker.io is the default
// registry, "library/" the default namespace there, and "latest" the default tag.
#ifndef CODEBOX_IMAGE_OCI_REFERENCE_H_
#define CODEBOX_IMAGE_OCI_REFERENCE_H_

#include <string>
#include <string_view>

#include "codebox/status.h"

namespace codebox::image {

struct ImageReference {
  std::string registry;    // "docker.io", "ghcr.io", "127.0.0.1:5000"
  std::string repository;  // "library/python", "org/app"
  std::string tag;         // "3.12-slim"; "" when only a digest is given
  std::string digest;      // "sha256:<64 hex>", or ""

  // "docker.io/library/python:3.12-slim", "127.0.0.1:5000/app@sha256:...": the name the store
  // keeps, and what skopeo is given after "docker://".
  std::string Canonical() const;
  // "docker.io/library/python": the repository without tag or digest.
  std::string Repository() const { return registry + "/" + repository; }
  // The short form docker prints: "python:3.12-slim" for docker.io/library/python:3.12-slim.
  std::string Familiar() const;
  // The same repository at `digest` ("docker.io/library/python@sha256:...").
  ImageReference AtDigest(const std::string& digest) const;
};

// Parses `text` (at most 255 characters for the name, tags of at most 128). A name without a
// tag or digest gets "latest". Errors say what part is malformed.
StatusOr<ImageReference> ParseImageReference(std::string_view text);

// True for "sha256:" followed by 64 lower-case hex digits (the only algorithm accepted).
bool IsSha256Digest(std::string_view digest);

// True when the registry is on this host or at a private address given as a literal
// (localhost, 127.0.0.0/8, ::1, 10/8, 172.16/12, 192.168/16): where `--insecure` (plain
// HTTP, no TLS verification) may be used.
bool IsLocalRegistry(std::string_view registry);

}  // namespace codebox::image

#endif  // CODEBOX_IMAGE_OCI_REFERENCE_H_
