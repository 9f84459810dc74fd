// OCI images into the store: `codebox image pull REF` (a registry, through skopeo) and
// `codebox image import FILE` (an OCI layout, an OCI archive or a docker-save archive). skopeo
// fetches and verifies digests into an OCI layout in a temp dir; codebox then reads that
// layout again, checking every blob itself (oci_layout.h), and unpacks the layers with its own
// hostile-input extractor (layer_extract.h). The tree lands in the store like a recipe's
// build: atomically, under a content-addressed id (from the image config's digest), with a
// manifest that records the reference, the digest and the run config.
#ifndef CODEBOX_IMAGE_OCI_IMPORT_H_
#define CODEBOX_IMAGE_OCI_IMPORT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/paths.h"
#include "codebox/status.h"
#include "image/store.h"

namespace codebox::image {

struct PullOptions {
  // Plain HTTP and no TLS verification: only for a registry on this host or at a private
  // address literal (IsLocalRegistry); anything else is refused.
  bool insecure = false;
  // "USER:PASSWORD" for the registry; empty: the registry auth file, if there is one.
  std::string creds;
  // The auth file skopeo reads; empty: $REGISTRY_AUTH_FILE, else the first that exists of
  // $XDG_RUNTIME_DIR/containers/auth.json, ~/.config/containers/auth.json,
  // ~/.docker/config.json.
  std::string authfile;
  uint64_t max_bytes = 16ull << 30;  // --max-size: unpacked (and compressed) image size
  bool keep_setuid = false;          // --keep-setuid: keep setuid/setgid bits in the tree
  bool force = false;                // fetch and unpack again even when the store has it
  std::string skopeo;                // program; empty: $CODEBOX_SKOPEO, else "skopeo"
  bool require_root = true;          // ownership in the tree needs root; tests may clear it
  std::chrono::milliseconds timeout = std::chrono::minutes(30);  // each skopeo run
  // Where skopeo's connections go. -1 (the CLI, the library): this host's network, with the
  // caller's proxy variables. Else (codebox serve's pulls for its clients) skopeo runs in this
  // network namespace (net/confined_network.h) with `network_env` (its proxy variables) in
  // place of the caller's.
  int net_namespace_fd = -1;
  std::vector<std::string> network_env;
};

using Progress = std::function<void(const std::string&)>;

// Pulls `reference` (name[:tag] or name@sha256:...) into the store at `home`. A reference
// with a digest that the store already has is not fetched again (no network at all); a tag
// is resolved with the registry, and an image whose config digest the store has is not
// fetched again either.
StatusOr<ImageInfo> PullImage(const std::string& home, const std::string& reference,
                              const PullOptions& options, const Progress& progress);

// Imports the image in `path`: a directory holding an OCI layout, an OCI archive (a tar of
// one) or a `docker save` archive. `name` (a reference, say "myapp:1") is what boxes then
// ask for; empty: the name the archive gives (docker's RepoTags, or an OCI layout's
// org.opencontainers.image.ref.name when it is a whole reference).
StatusOr<ImageInfo> ImportImage(const std::string& home, const std::string& path,
                                const std::string& name, const PullOptions& options,
                                const Progress& progress);

// True when `name` is not a recipe image's name but reads as an OCI reference: a box's
// `image` option takes either (a recipe's name wins: "python" is the recipe, and
// "python:latest" or "docker.io/library/python" the Docker Hub image).
bool IsOciImageName(const std::string& name);

// The OCI image `reference` names, from the first of `stores` that has it; no network.
// kNotFound says how to pull it.
StatusOr<ImageInfo> FindOciImage(const std::vector<base::ImageStore>& stores,
                                 const std::string& reference);

// The store's pointer files for OCI references (images/by-ref/<escaped reference>).
std::string RefPointerName(const std::string& canonical_reference);

}  // namespace codebox::image

#endif  // CODEBOX_IMAGE_OCI_IMPORT_H_
