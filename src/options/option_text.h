// Option values typed as text (CLI flags, `codebox serve --pool` specs), in each option's
// unit: sizes as 512, 512M, 2G; durations as seconds, 500ms, 2m or none; bools as
// true/false/yes/no/1/0; the environment as K=V.
#ifndef CODEBOX_OPTIONS_OPTION_TEXT_H_
#define CODEBOX_OPTIONS_OPTION_TEXT_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "codebox/option_schema.h"
#include "codebox/status.h"

namespace codebox::options {

// Text as a value of `spec` (given through `alias`, or its name when null): sizes as 512,
// 512M, 2G in the unit of the name used; durations as seconds, 500ms, 2m or none; bools as
// true/false/yes/no/1/0; the environment as K=V; a list as one entry.
StatusOr<OptionValue> ParseOptionText(const OptionSpec& spec, const OptionAlias* alias,
                                      const std::string& text);

// "512", "512M", "2G", "1.5G" -> MiB.
StatusOr<uint64_t> ParseMebibytes(const std::string& text);
// "30", "1.5", "500ms", "2m" -> milliseconds; at least 1 ms.
StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& text);
// A duration, or "none" -> kNoTimeout.
StatusOr<std::chrono::milliseconds> ParseTimeout(const std::string& text);

}  // namespace codebox::options

#endif  // CODEBOX_OPTIONS_OPTION_TEXT_H_
