#include "http/tar.h"

namespace codebox::http {

StatusOr<std::string> TarDirectory(const std::string&, uint64_t) {
  return Internal("TarDirectory: not yet implemented");
}

Status UntarInto(std::string_view, const std::string&, const UntarLimits&) {
  return Internal("UntarInto: not yet implemented");
}

}  // namespace codebox::http
