// Command-line flags that describe a box, shared by `run`, `exec` and `ask`.
#ifndef CODEBOX_CLI_BOX_FLAGS_H_
#define CODEBOX_CLI_BOX_FLAGS_H_

#include <string>
#include <vector>

#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::cli {

// Exit statuses of codebox itself, apart from the box's own (which are passed through).
inline constexpr int kExitTimedOut = 124;     // as timeout(1)
inline constexpr int kExitCodeboxError = 125;  // codebox could not run it (as docker run)

// Help text for the flags ParseBoxFlag understands.
extern const char kBoxFlagsHelp[];

// If args[*i] is a box flag, consumes it (and its value), updates *options and returns true.
// Returns false if it is not a box flag. A malformed value is an InvalidArgument status.
StatusOr<bool> ParseBoxFlag(const std::vector<std::string>& args, size_t* i, BoxOptions* options);

// "512", "512M", "2G", "1.5G" -> MiB.
StatusOr<uint64_t> ParseMebibytes(const std::string& text);
// "30", "1.5", "500ms", "2m" -> milliseconds; at least 1 ms.
StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& text);
// A duration, or "none" -> kNoTimeout.
StatusOr<std::chrono::milliseconds> ParseTimeout(const std::string& text);

// Prints "codebox: <message>" to stderr (and a hint on a second line when given).
void PrintError(const std::string& command, const Status& status);

}  // namespace codebox::cli

#endif  // CODEBOX_CLI_BOX_FLAGS_H_
