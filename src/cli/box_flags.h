// Command-line flags that describe a box, shared by `run`, `exec` and `ask`: one per option
// of the box option schema (codebox/option_schema.h), --<name with dashes> and each alias,
// as `--flag VALUE` or `--flag=VALUE`.
#ifndef CODEBOX_CLI_BOX_FLAGS_H_
#define CODEBOX_CLI_BOX_FLAGS_H_

#include <string>
#include <vector>

#include "options/option_text.h"
#include "codebox/option_schema.h"
#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::cli {

// Exit statuses of codebox itself, apart from the box's own (which are passed through).
inline constexpr int kExitUsage = 2;           // a bad flag or value (as getopt tools)
inline constexpr int kExitTimedOut = 124;      // as timeout(1)
inline constexpr int kExitCodeboxError = 125;  // codebox could not run it (as docker run)

// Help text for the flags ParseBoxFlag understands, from the schema.
std::string BoxFlagsHelp();

// docs/options.md: every box and exec option as a reference table, from the schema.
std::string OptionsMarkdown();

// If args[*i] is a box flag, consumes it (and its value), updates *options and returns true.
// Returns false if it is not a box flag. A malformed value is an InvalidArgument status that
// names the flag as typed. A bool flag without "=VALUE" sets true; --env adds one variable, a list
// flag
// (--allow-host) one entry.
StatusOr<bool> ParseBoxFlag(const std::vector<std::string>& args, size_t* i, BoxOptions* options);

// BoxOptions::Validate for options that came from the command line: each error names the
// option's flag (--max-processes, --allow-host), never its C++ field. Call it before creating
// a box, so that a bad combination is a usage error (kExitUsage) in the user's words.
Status ValidateForCli(const BoxOptions& options);

// "; did you mean --memory?" when `flag` is a few slips from a box flag, else "".
std::string BoxFlagHint(const std::string& flag);

// Every box flag as typed ("--memory", "--mem", ...), for "did you mean" across all of a
// command's flags.
std::vector<std::string> BoxFlagNames();


// Option values as text (ParseOptionText, ParseMebibytes, ParseDuration, ParseTimeout): in
// src/box/option_text.h, shared with the server's --pool specs.
using options::ParseDuration;
using options::ParseMebibytes;
using options::ParseOptionText;
using options::ParseTimeout;

// Prints "codebox: <message>" to stderr (and a hint on a second line when given).
void PrintError(const std::string& command, const Status& status);

}  // namespace codebox::cli

#endif  // CODEBOX_CLI_BOX_FLAGS_H_
