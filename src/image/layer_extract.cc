#include "image/layer_extract.h"

namespace codebox::image {

Status ApplyLayer(const std::string&, const std::string&, const std::string& label,
                  const ExtractLimits&, ExtractStats*) {
  return Internal("unpack " + label + ": the layer extractor is not built yet");
}

}  // namespace codebox::image
