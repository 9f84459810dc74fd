// Printing the cells of a code-interpreter session (Box::RunCode) on a terminal, for
// `codebox repl` and `codebox run --session`: streams as they come, results, errors and why a
// cell ended. Everything a cell gives is the box's choice: text is made terminal-safe, images
// are saved under names the host picks.
#ifndef CODEBOX_CLI_CELL_OUTPUT_H_
#define CODEBOX_CLI_CELL_OUTPUT_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "cell_images/image_files.h"
#include "codebox/execution.h"
#include "codebox/status.h"

namespace codebox::cli {

// Box text made terminal-safe (base::TerminalSafe) as it streams: a UTF-8 character split
// between two chunks is held back until its rest comes, instead of being escaped.
class SafeTextStream {
 public:
  // The safe form of what can be shown of `chunk` now.
  std::string Feed(std::string_view chunk);
  // What was held back (escaped: it never became a character).
  std::string Finish();

 private:
  std::string pending_;
};

// Past this many images in one cell the rest are counted, not saved: a cell cannot fill the
// disk with small files.
inline constexpr int kMaxImagesPerCell = 100;

// Where a CellPrinter writes: the terminal's stdout and stderr in the CLI, strings in tests.
struct CellSinks {
  std::function<void(std::string_view)> out;
  std::function<void(std::string_view)> err;
};

// How a cell ended, beyond the Execution: said after its output.
struct CellEnd {
  bool interrupted_by_user = false;      // Ctrl-C (Box::InterruptCode), not a timeout
  std::chrono::milliseconds timeout{0};  // the cell's limit, for the "timed out" line
  uint64_t output_limit_bytes = 0;
};

// Prints one cell at a time. The streaming calls may come from another thread than Begin/End.
class CellPrinter {
 public:
  // image_dir: where image results are saved (cell_images::ImageSaver: checked first, never
  // overwriting a file), as out-CELL-K.EXT (CELL: the host's count of cells, K: 1, 2, ... in
  // each cell, skipping names already taken); nullopt: they are described, not saved.
  CellPrinter(CellSinks sinks, std::optional<std::string> image_dir);

  // RunCodeOptions whose callbacks print as the cell runs (timeout left unset).
  RunCodeOptions Streaming();
  void Begin(int cell);
  // The main result (the last expression's value), the error and the notes.
  void End(const Execution& execution, const CellEnd& how);

  void OnStdout(std::string_view chunk);
  void OnStderr(std::string_view chunk);
  void OnResult(const CellResult& result);

 private:
  void PrintResult(const CellResult& result);
  void Out(std::string_view safe_text);
  void Err(std::string_view safe_text);
  void Note(const std::string& text);  // a line of codebox's own on stderr, on a fresh line
  void FreshLine();

  CellSinks sinks_;
  std::optional<std::string> image_dir_;
  std::optional<cell_images::ImageSaver> images_;  // this cell's, when image_dir_ is given
  std::mutex mu_;
  int cell_ = 0;
  int images_dropped_ = 0;
  size_t results_shown_ = 0;  // results of this cell printed while it ran (all but the main)
  SafeTextStream out_stream_, err_stream_;
  bool at_line_start_ = true;  // of the terminal, which both sinks share
};

}  // namespace codebox::cli

#endif  // CODEBOX_CLI_CELL_OUTPUT_H_
