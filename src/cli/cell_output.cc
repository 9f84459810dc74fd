#include "cli/cell_output.h"

#include <cstdio>
#include <limits>

#include "base/text.h"

namespace codebox::cli {
namespace {

constexpr size_t kNoCut = std::numeric_limits<size_t>::max();

std::string Safe(std::string_view text) { return base::TerminalSafe(text, kNoCut); }

// How many bytes at the end of `data` begin a UTF-8 character that is not complete yet.
size_t IncompleteTail(std::string_view data) {
  for (size_t k = 1; k <= 3 && k <= data.size(); ++k) {
    const auto b = static_cast<unsigned char>(data[data.size() - k]);
    if ((b & 0xc0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = b >= 0xf5 ? 1 : b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc2 ? 2 : 1;
    return need > k ? k : 0;
  }
  return 0;
}

}  // namespace

std::string SafeTextStream::Feed(std::string_view chunk) {
  pending_.append(chunk);
  const size_t hold = IncompleteTail(pending_);
  std::string out = Safe(std::string_view(pending_).substr(0, pending_.size() - hold));
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string SafeTextStream::Finish() {
  std::string out = Safe(pending_);
  pending_.clear();
  return out;
}

CellPrinter::CellPrinter(CellSinks sinks, std::optional<std::string> image_dir)
    : sinks_(std::move(sinks)), image_dir_(std::move(image_dir)) {}

RunCodeOptions CellPrinter::Streaming() {
  RunCodeOptions o;
  o.on_stdout = [this](std::string_view d) { OnStdout(d); };
  o.on_stderr = [this](std::string_view d) { OnStderr(d); };
  o.on_result = [this](const CellResult& r) { OnResult(r); };
  return o;
}

void CellPrinter::Begin(int cell) {
  std::lock_guard lock(mu_);
  cell_ = cell;
  if (image_dir_) {
    images_.emplace(cell_images::ImageSaverOptions{.dir = *image_dir_,
                                                   .name_prefix = "out-" + std::to_string(cell),
                                                   .max_images = kMaxImagesPerCell});
  }
  images_dropped_ = 0;
  results_shown_ = 0;
}

void CellPrinter::OnStdout(std::string_view chunk) {
  std::lock_guard lock(mu_);
  Out(out_stream_.Feed(chunk));
}

void CellPrinter::OnStderr(std::string_view chunk) {
  std::lock_guard lock(mu_);
  Err(err_stream_.Feed(chunk));
}

void CellPrinter::OnResult(const CellResult& result) {
  if (result.is_main_result) return;  // printed last, by End, as Python's REPL does
  std::lock_guard lock(mu_);
  PrintResult(result);
  ++results_shown_;
}

void CellPrinter::End(const Execution& e, const CellEnd& how) {
  std::lock_guard lock(mu_);
  Out(out_stream_.Finish());
  Err(err_stream_.Finish());
  size_t others = 0;  // results that are not the main one, in order
  const CellResult* main_result = nullptr;
  for (const CellResult& r : e.results) {
    if (r.is_main_result) {
      main_result = &r;
    } else if (others++ >= results_shown_) {
      PrintResult(r);  // not streamed (a caller without Streaming())
    }
  }
  if (main_result != nullptr) PrintResult(*main_result);
  if (e.error) {
    const CellError& err = *e.error;
    if (e.kernel_restarted) {
      Note(err.value.empty() ? "kernel restarted: state lost" : err.value);
    } else {
      FreshLine();
      std::string text = err.traceback.empty() ? err.name + ": " + err.value : err.traceback;
      if (text.empty() || text.back() != '\n') text.push_back('\n');
      Err(Safe(text));
    }
  }
  if (e.timed_out && !e.kernel_restarted && !how.interrupted_by_user) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", how.timeout.count() / 1000.0);
    Note(std::string("timed out after ") + secs +
         " s and interrupted; the session's variables are kept (--timeout to change)");
  }
  if (images_dropped_ > 0) {
    Note(std::to_string(images_dropped_) + " more images of this cell were not saved: at most " +
         std::to_string(kMaxImagesPerCell) + " per cell");
  }
  if (e.output_truncated) {
    Note("output truncated: the cell passed the " + base::FormatSize(how.output_limit_bytes) +
         " output limit (--output-limit to change)");
  }
}

void CellPrinter::PrintResult(const CellResult& r) {
  const bool full = images_ && images_->full();
  std::optional<cell_images::SavedImage> image =
      images_ ? images_->SaveOne(r)
              : cell_images::DescribeImage(r, cell_images::ImageSaverOptions().max_image_bytes);
  if (image) {
    if (full) {
      ++images_dropped_;
      return;
    }
    FreshLine();
    const bool described_only = !image->saved() && image->note.empty();
    Out(Safe(described_only ? "[" + image->What() + ": not saved; give --out DIR to save images]"
                            : image->Summary(/*with_path=*/true)) +
        "\n");
    return;
  }
  if (const std::string* text = r.Get("text/plain")) {
    FreshLine();
    Out(Safe(*text) + "\n");
    return;
  }
  std::string mimes;
  for (const auto& [mime, value] : r.data) mimes += (mimes.empty() ? "" : ", ") + Safe(mime);
  FreshLine();
  Out("[a result in " + (mimes.empty() ? std::string("no format") : mimes) +
      ", without text/plain to show]\n");
}

void CellPrinter::Out(std::string_view safe_text) {
  if (safe_text.empty()) return;
  sinks_.out(safe_text);
  at_line_start_ = safe_text.back() == '\n';
}

void CellPrinter::Err(std::string_view safe_text) {
  if (safe_text.empty()) return;
  sinks_.err(safe_text);
  at_line_start_ = safe_text.back() == '\n';
}

void CellPrinter::Note(const std::string& text) {
  FreshLine();
  Err("[" + Safe(text) + "]\n");
}

void CellPrinter::FreshLine() {
  if (!at_line_start_) Out("\n");
}

}  // namespace codebox::cli
