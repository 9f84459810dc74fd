// Reading an OCI image layout (the directory `skopeo copy ... oci:DIR` writes): index.json ->
// the linux/amd64 image manifest -> config and layers, with every blob's size and sha256
// checked against its descriptor. Everything in it is hostile input: sizes are bounded
// before anything is read, and JSON of the wrong shape is an error, never an exception.
#ifndef CODEBOX_IMAGE_OCI_LAYOUT_H_
#define CODEBOX_IMAGE_OCI_LAYOUT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/status.h"
#include "image/store.h"

namespace codebox::image {

// The one platform codebox runs.
inline constexpr char kPlatformOs[] = "linux";
inline constexpr char kPlatformArch[] = "amd64";

inline constexpr uint64_t kMaxJsonBlobBytes = 4u << 20;  // an index, manifest or config
inline constexpr size_t kMaxLayers = 256;                // docker's own limit is 127

struct OciDescriptor {
  std::string media_type;
  std::string digest;  // "sha256:<hex>", checked
  uint64_t size = 0;
};

// An image manifest's parts (from its JSON; nothing read from disk yet).
struct OciManifest {
  OciDescriptor config;
  std::vector<OciDescriptor> layers;
  uint64_t LayerBytes() const;
};

struct OciImage {
  std::string manifest_digest;  // of the manifest the layout holds
  std::string config_digest;
  std::vector<OciDescriptor> layers;
  std::vector<std::string> layer_paths;  // blobs/sha256/<hex> of each layer, in order
  ImageConfig config;                    // env, working_dir, user; uid/gid not resolved yet
};

// True for an image index (OCI) or manifest list (Docker); false for an image manifest.
// Errors when `json` is not a JSON object or names no known media type.
StatusOr<bool> IsImageIndex(std::string_view json);
// The linux/amd64 manifest an index lists; the error names the platforms the index has.
StatusOr<OciDescriptor> SelectPlatform(std::string_view index_json);
// An image manifest's config and layer descriptors.
StatusOr<OciManifest> ParseManifest(std::string_view manifest_json);
// An image config's Env, WorkingDir and User, checked (an env entry without '=' or with a NUL
// is an error, WorkingDir is made absolute and clean); the error says when the image is not
// for linux/amd64.
StatusOr<ImageConfig> ParseImageConfig(std::string_view config_json);

// Reads and checks the layout at `dir`: its index must lead to exactly one image manifest for
// linux/amd64 (through a nested index if need be). `max_layer_bytes` bounds the layers'
// compressed sizes together.
StatusOr<OciImage> ReadOciLayout(const std::string& dir, uint64_t max_layer_bytes);

}  // namespace codebox::image

#endif  // CODEBOX_IMAGE_OCI_LAYOUT_H_
