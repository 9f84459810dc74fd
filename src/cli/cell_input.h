// When a REPL cell is complete: the host-side check behind the `>>> ` / `... ` prompts of
// `codebox repl`. It follows Python's interactive rules closely enough for typing, without
// parsing Python: the box's kernel reports any real syntax error.
#ifndef CODEBOX_CLI_CELL_INPUT_H_
#define CODEBOX_CLI_CELL_INPUT_H_

#include <string_view>

namespace codebox::cli {

// True when `cell` (the lines typed so far, joined by '\n', without a final newline) needs
// another line:
//   * an open bracket, an open triple-quoted string, or a line ending in `\`;
//   * a block: a logical line that ends in `:`, starts with a compound-statement keyword
//     (`if x: y` too, as in Python's REPL) or a decorator. A block ends with an empty line.
// A cell that cannot become valid by adding lines (an unterminated '...' string, a stray
// closing bracket) is complete, so that the kernel reports the error.
bool NeedsMoreInput(std::string_view cell);

// True for the inputs that leave the REPL: exit, quit, exit(), quit() (spaces allowed).
bool IsExitCommand(std::string_view cell);

}  // namespace codebox::cli

#endif  // CODEBOX_CLI_CELL_INPUT_H_
