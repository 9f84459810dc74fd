#include "cli/cell_output.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

#include "base/io.h"

namespace codebox::cli {
namespace {

// A 2x3 PNG header (enough for cell_images::PngSize) and its base64.
const std::string kPng("\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x02\0\0\0\x03\x08\x06\0\0\0", 29);
constexpr char kPngBase64[] = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAADCAYAAAA=";

TEST(SafeTextStreamTest, HoldsBackASplitCharacter) {
  SafeTextStream s;
  EXPECT_EQ(s.Feed("caf\xc3"), "caf");
  EXPECT_EQ(s.Feed("\xa9 \xe2\x9c"), "\xc3\xa9 ");
  EXPECT_EQ(s.Feed("\x93"), "\xe2\x9c\x93");
  EXPECT_EQ(s.Finish(), "");
}

TEST(SafeTextStreamTest, EscapesControlsAndWhatNeverCompletes) {
  SafeTextStream s;
  EXPECT_EQ(s.Feed("\x1b]0;title\x07ok\n"), "\\x1b]0;title\\x07ok\n");
  EXPECT_EQ(s.Feed("\xf0\x9f"), "");
  EXPECT_EQ(s.Finish(), "\\xf0\\x9f");
  EXPECT_EQ(s.Feed("\xff"), "\\xff");  // not a lead byte: nothing to wait for
}

class CellPrinterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cell_output_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  CellPrinter Printer(bool save_images = true) {
    CellSinks sinks{[this](std::string_view t) { out_ += t; },
                    [this](std::string_view t) { err_ += t; }};
    return CellPrinter(sinks, save_images ? std::optional<std::string>(dir_) : std::nullopt);
  }

  std::string dir_, out_, err_;
};

CellResult Result(std::map<std::string, std::string> data, bool main = false) {
  CellResult r;
  r.data = std::move(data);
  r.is_main_result = main;
  return r;
}

TEST_F(CellPrinterTest, StreamsThenPrintsTheMainResultLast) {
  CellPrinter p = Printer();
  p.Begin(1);
  p.OnStdout("loading");  // no newline: the result starts on a fresh line
  p.OnResult(Result({{"text/plain", "42"}}, /*main=*/true));  // held for End
  p.OnResult(Result({{"text/plain", "shown"}}));
  Execution e;
  e.stdout_chunks = {"loading"};
  e.results = {Result({{"text/plain", "shown"}}), Result({{"text/plain", "42"}}, true)};
  p.End(e, {});
  EXPECT_EQ(out_, "loading\nshown\n42\n");
  EXPECT_EQ(err_, "");
}

TEST_F(CellPrinterTest, PrintsResultsThatWereNotStreamed) {
  CellPrinter p = Printer();
  p.Begin(1);
  Execution e;
  e.results = {Result({{"text/plain", "a"}}), Result({{"text/html", "<b>"}})};
  p.End(e, {});
  EXPECT_EQ(out_, "a\n[a result in text/html, without text/plain to show]\n");
}

TEST_F(CellPrinterTest, SavesImagesUnderHostNames) {
  CellPrinter p = Printer();
  p.Begin(3);
  p.OnResult(Result({{"image/png", kPngBase64}, {"text/plain", "<Figure>"}}));
  p.OnResult(Result({{"image/svg+xml", "<svg/>"}, {"text/plain", "<SVG>"}}));
  p.End(Execution{}, {});
  EXPECT_EQ(out_, "[image/png 2x3 saved to " + dir_ + "/out-3-1.png]\n[image/svg+xml saved to " +
                      dir_ + "/out-3-2.svg]\n");
  EXPECT_EQ(*base::ReadFile(dir_ + "/out-3-1.png"), kPng);
  EXPECT_EQ(*base::ReadFile(dir_ + "/out-3-2.svg"), "<svg/>");
}

TEST_F(CellPrinterTest, NeverOverwritesAFile) {
  ASSERT_TRUE(base::WriteFile(dir_ + "/out-1-1.png", "mine").ok());
  CellPrinter p = Printer();
  p.Begin(1);
  p.OnResult(Result({{"image/png", kPngBase64}}));
  EXPECT_EQ(out_, "[image/png 2x3 saved to " + dir_ + "/out-1-2.png]\n");
  EXPECT_EQ(*base::ReadFile(dir_ + "/out-1-1.png"), "mine");
}

TEST_F(CellPrinterTest, BadImageDataIsReportedNotSaved) {
  CellPrinter p = Printer();
  p.Begin(1);
  p.OnResult(Result({{"image/png", "not base64!"}}));
  EXPECT_NE(out_.find("[image/png left out: not valid base64"), std::string::npos) << out_;
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

TEST_F(CellPrinterTest, SavesAtMostAHundredImagesPerCell) {
  CellPrinter p = Printer();
  p.Begin(1);
  for (int i = 0; i < kMaxImagesPerCell + 5; ++i) p.OnResult(Result({{"image/png", kPngBase64}}));
  p.End(Execution{}, {});
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/out-1-100.png"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/out-1-101.png"));
  EXPECT_EQ(err_, "[5 more images of this cell were not saved: at most 100 per cell]\n");
  p.Begin(2);  // the count is per cell
  p.OnResult(Result({{"image/png", kPngBase64}}));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/out-2-1.png"));
}

TEST_F(CellPrinterTest, WithoutAnOutputDirImagesAreDescribed) {
  CellPrinter p = Printer(/*save_images=*/false);
  p.Begin(1);
  p.OnResult(Result({{"image/png", kPngBase64}}));
  p.OnResult(Result({{"image/jpeg", kPngBase64}}));  // checked as if it were to be saved
  EXPECT_EQ(out_,
            "[image/png 2x3: not saved; give --out DIR to save images]\n"
            "[image/jpeg left out: not a JPEG (no SOI marker)]\n");
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

TEST_F(CellPrinterTest, TheSavedPathIsTerminalSafe) {
  dir_ += "/\x1b[2J";  // the user's own --out, made when the first image comes
  CellPrinter p = Printer();
  p.Begin(1);
  p.OnResult(Result({{"image/png", kPngBase64}}));
  EXPECT_EQ(out_, "[image/png 2x3 saved to " + dir_.substr(0, dir_.size() - 4) +
                      "\\x1b[2J/out-1-1.png]\n");
  EXPECT_EQ(*base::ReadFile(dir_ + "/out-1-1.png"), kPng);
  dir_.resize(dir_.size() - 5);  // for TearDown
}

TEST_F(CellPrinterTest, ErrorsPrintTheirTracebackSafely) {
  CellPrinter p = Printer();
  p.Begin(1);
  Execution e;
  e.error = CellError{"ZeroDivisionError", "division by zero",
                      "Traceback\n\x1b[31mZeroDivisionError: division by zero"};
  p.End(e, {});
  EXPECT_EQ(err_, "Traceback\n\\x1b[31mZeroDivisionError: division by zero\n");
  EXPECT_EQ(out_, "");
}

TEST_F(CellPrinterTest, SaysWhyACellEnded) {
  CellPrinter p = Printer();
  p.Begin(1);
  Execution timed_out;
  timed_out.timed_out = true;
  timed_out.error = CellError{"KeyboardInterrupt", "", "KeyboardInterrupt\n"};
  p.End(timed_out, {.timeout = std::chrono::milliseconds(2500)});
  EXPECT_NE(err_.find("[timed out after 2.5 s and interrupted; the session's variables are kept"),
            std::string::npos)
      << err_;

  err_.clear();
  p.End(timed_out, {.interrupted_by_user = true});  // Ctrl-C: the traceback says it all
  EXPECT_EQ(err_, "KeyboardInterrupt\n");

  err_.clear();
  Execution restarted;
  restarted.kernel_restarted = restarted.out_of_memory = true;
  restarted.error =
      CellError{"KernelRestarted", "kernel restarted: state lost (out of memory)", ""};
  restarted.output_truncated = true;
  p.End(restarted, {.output_limit_bytes = 1 << 20});
  EXPECT_EQ(err_,
            "[kernel restarted: state lost (out of memory)]\n"
            "[output truncated: the cell passed the 1 MiB output limit (--output-limit to "
            "change)]\n");
}

}  // namespace
}  // namespace codebox::cli
