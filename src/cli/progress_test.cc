#include "cli/progress.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "base/log.h"

namespace codebox::cli {
namespace {

using std::chrono::milliseconds;

// A FILE* whose bytes the test reads once the writer is done.
class Capture {
 public:
  Capture() : file_(::open_memstream(&data_, &size_)) {}
  ~Capture() {
    if (file_ != nullptr) std::fclose(file_);
    std::free(data_);
  }
  std::FILE* file() { return file_; }
  std::string Take() {
    std::fclose(file_);
    file_ = nullptr;
    return std::string(data_, size_);
  }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  std::FILE* file_;
};

// What a terminal shows at the end: the text after the last "\r", with "\033[K" erasing it.
std::string LastLine(const std::string& bytes) {
  std::string line = bytes.substr(bytes.rfind('\r') + 1);
  const size_t erase = line.find("\033[K");
  return erase == std::string::npos ? line : line.substr(0, erase);
}

TEST(StatusLineTest, DisabledWritesNothing) {
  Capture out;
  {
    StatusLine line(out.file(), /*enabled=*/false, 80);
    line.Show("[step 1] asking m...");
    std::this_thread::sleep_for(milliseconds(150));
    line.Clear();
  }
  EXPECT_EQ(out.Take(), "");
}

TEST(StatusLineTest, SpinsInPlaceAndClearsWithoutATrace) {
  Capture out;
  {
    StatusLine line(out.file(), /*enabled=*/true, 80);
    line.Show("[step 1] asking m...");
    // Four or more turns of the spinner, with room for a loaded machine.
    std::this_thread::sleep_for(milliseconds(650));
    line.Clear();
    // Nothing more is drawn once cleared, though the spinner thread still runs.
    std::this_thread::sleep_for(milliseconds(250));
  }
  const std::string bytes = out.Take();
  EXPECT_EQ(bytes.rfind("\r[step 1] asking m... |\033[K", 0), 0u) << bytes;
  // The spinner turned: later frames were drawn over the first.
  EXPECT_NE(bytes.find("\r[step 1] asking m... /\033[K"), std::string::npos) << bytes;
  EXPECT_NE(bytes.find("\r[step 1] asking m... -\033[K"), std::string::npos) << bytes;
  // It ends erased, with no newline: the next output starts on the same, empty line.
  ASSERT_GE(bytes.size(), 4u);
  EXPECT_EQ(bytes.substr(bytes.size() - 4), "\r\033[K");
  EXPECT_EQ(bytes.find('\n'), std::string::npos);
  EXPECT_EQ(LastLine(bytes), "");
}

TEST(StatusLineTest, ShowReplacesAndDestructionClears) {
  Capture out;
  {
    StatusLine line(out.file(), true, 80);
    line.Show("first");
    line.Show("second");
  }
  const std::string bytes = out.Take();
  EXPECT_NE(bytes.find("\rsecond |\033[K"), std::string::npos) << bytes;
  EXPECT_EQ(bytes.substr(bytes.size() - 4), "\r\033[K");
}

TEST(StatusLineTest, ALongLineIsCutToTheTerminalWidth) {
  Capture out;
  {
    StatusLine line(out.file(), true, 20);
    line.Show(std::string(50, 'x'));
  }
  const std::string bytes = out.Take();
  size_t start = 0;
  while ((start = bytes.find('\r', start)) != std::string::npos) {
    size_t end = bytes.find("\033[K", start);
    ASSERT_NE(end, std::string::npos);
    EXPECT_LT(end - start - 1, 20u)
        << "a drawn line would wrap: " << bytes.substr(start, end - start);
    start = end;
  }
}

TEST(StatusLineTest, LogLinesGoAboveTheStatus) {
  Capture out;
  {
    StatusLine line(out.file(), true, 80);
    line.Show("waiting");
    CODEBOX_LOG(kWarn, "pulling an image");
    line.Clear();
  }
  // Restored: what was the sink before the line showed (none) is again.
  EXPECT_EQ(base::SetLogSink(nullptr), nullptr);
  const std::string bytes = out.Take();
  const std::string log = "codebox[" + std::to_string(::getpid()) + "] warn: pulling an image\n";
  // The status erased, the log line on a line of its own, the status drawn again under it.
  EXPECT_NE(bytes.find("\r\033[K" + log + "\rwaiting "), std::string::npos) << bytes;
  EXPECT_EQ(bytes.substr(bytes.size() - 4), "\r\033[K");
}

box::DriverChoice Choice(DriverKind kind, bool emulated) { return {kind, emulated, "test"}; }

TEST(AnnounceBoxStartTest, OnlyAVmUnderEmulationOfThisHostIsSlowToStart) {
  BoxOptions options;
  EXPECT_TRUE(StartsEmulated(options, Choice(DriverKind::kVm, true)));
  EXPECT_FALSE(StartsEmulated(options, Choice(DriverKind::kVm, false)));
  EXPECT_FALSE(StartsEmulated(options, Choice(DriverKind::kJail, false)));
  EXPECT_FALSE(StartsEmulated(options, Unavailable("no driver can run here")));
  options.server = "unix:/run/codebox/codebox.sock";  // the server's host decides
  EXPECT_FALSE(StartsEmulated(options, Choice(DriverKind::kVm, true)));
}

TEST(AnnounceBoxStartTest, SaysItOnATerminalAndErasesItWhenTheBoxIsUp) {
  BoxOptions options;
  options.driver = DriverKind::kVm;
  options.allow_emulation = true;
  int probes = 0;
  DriverChooser emulated = [&](const BoxOptions& o) -> StatusOr<box::DriverChoice> {
    ++probes;
    EXPECT_EQ(o.driver, DriverKind::kVm);
    return Choice(DriverKind::kVm, true);
  };
  Capture out;
  BoxStartNotice notice = AnnounceBoxStart(options, out.file(), /*terminal=*/true, emulated);
  EXPECT_TRUE(notice.showing());
  notice.Done();
  EXPECT_FALSE(notice.showing());
  const std::string bytes = out.Take();
  EXPECT_EQ(bytes.rfind("\rstarting VM (emulated, a few seconds)... |", 0), 0u) << bytes;
  EXPECT_EQ(LastLine(bytes), "");
  EXPECT_EQ(probes, 1);
}

TEST(AnnounceBoxStartTest, SilentOffATerminalOrForAFastBox) {
  BoxOptions options;
  int probes = 0;
  DriverChooser emulated = [&](const BoxOptions&) -> StatusOr<box::DriverChoice> {
    ++probes;
    return Choice(DriverKind::kVm, true);
  };
  DriverChooser jail = [&](const BoxOptions&) -> StatusOr<box::DriverChoice> {
    ++probes;
    return Choice(DriverKind::kJail, false);
  };
  Capture out;
  {
    // Not a terminal: the host is not even probed.
    BoxStartNotice piped = AnnounceBoxStart(options, out.file(), false, emulated);
    EXPECT_FALSE(piped.showing());
    EXPECT_EQ(probes, 0);
    BoxStartNotice fast = AnnounceBoxStart(options, out.file(), true, jail);
    EXPECT_FALSE(fast.showing());
    EXPECT_EQ(probes, 1);
    options.server = "http://127.0.0.1:1";
    BoxStartNotice remote = AnnounceBoxStart(options, out.file(), true, emulated);
    EXPECT_FALSE(remote.showing());
    EXPECT_EQ(probes, 1);
  }
  EXPECT_EQ(out.Take(), "");
}

}  // namespace
}  // namespace codebox::cli
