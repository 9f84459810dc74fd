// Base64 (RFC 4648, standard alphabet): how Jupyter, E2B and the code-interpreter kernel
// carry image/png and image/jpeg results as text.
#ifndef CODEBOX_BASE_BASE64_H_
#define CODEBOX_BASE_BASE64_H_

#include <string>
#include <string_view>

#include "codebox/status.h"

namespace codebox::base {

// The bytes `text` encodes. Whitespace (line breaks included) is skipped, as Jupyter's
// encoders insert it; the padding is optional. Any other character outside the alphabet, or a
// length no encoder makes, is an InvalidArgument naming the offset.
StatusOr<std::string> Base64Decode(std::string_view text);

}  // namespace codebox::base

#endif  // CODEBOX_BASE_BASE64_H_
