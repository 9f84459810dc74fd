// What goes into a tool result from a box, made safe: text capped and with its control bytes
// escaped, images decoded, checked and encoded again by the host.
#ifndef CODEBOX_MCP_CONTENT_H_
#define CODEBOX_MCP_CONTENT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/text.h"
#include "codebox/status.h"

namespace codebox::mcp {

// Box text for a result: the first max_bytes of it, control bytes and invalid UTF-8 escaped
// (base::TerminalSafe: clients show results in terminals too), and a note of the bytes cut.
std::string SafeText(std::string_view text, uint64_t max_bytes);
// The same for output that came in chunks, without joining more than max_bytes of them.
std::string SafeText(const std::vector<std::string>& chunks, uint64_t max_bytes);

bool IsUtf8(std::string_view bytes);

// "image/png" or "image/jpeg" when `bytes` start like one (and have a header the host can
// read), else "".
std::string ImageType(std::string_view bytes);

// An image a cell returned (base64 from the box) as the data of an image content: decoded
// within max_bytes, checked to be the `mime` it claims, encoded again. The error says why it
// is left out.
StatusOr<std::string> CheckedImage(std::string_view base64, std::string_view mime,
                                   uint64_t max_bytes);

}  // namespace codebox::mcp

#endif  // CODEBOX_MCP_CONTENT_H_
