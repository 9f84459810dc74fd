// The tools in real jail boxes, through Session and LocalBoxSource as `codebox mcp` uses them.
// Skips (as tests/box does) where this host cannot make a box of the image.
#include <gtest/gtest.h>

#include <thread>

#include "cell_images/image_data.h"
#include "mcp/session.h"
#include "testing/box_test_util.h"

namespace codebox::mcp {
namespace {

using nlohmann::json;

class ToolsTest : public ::testing::Test {
 protected:
  // A session over LocalBoxSource, initialized; nullptr after GTEST_SKIP's reason.
  void Start(const std::string& image, SessionOptions options = {}) {
    BoxOptions box = testing::TestBoxOptions();
    box.image = image;
    {
      std::string skip;
      if (!testing::MakeBoxOrSkipReason(box, &skip)) GTEST_SKIP() << skip;
    }
    session_ = std::make_unique<Session>(options, LocalBoxSource(box));
    auto init = session_->Handle({{"jsonrpc", "2.0"},
                                  {"id", 0},
                                  {"method", "initialize"},
                                  {"params",
                                   {{"protocolVersion", "2025-11-25"},
                                    {"capabilities", json::object()},
                                    {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}});
    ASSERT_TRUE(init && init->contains("result"));
  }

  // The result of tools/call `name`; fails the test on a JSON-RPC error.
  json Call(const std::string& name, json arguments, const json& id = 1) {
    auto answer = session_->Handle({{"jsonrpc", "2.0"},
                                    {"id", id},
                                    {"method", "tools/call"},
                                    {"params", {{"name", name}, {"arguments", arguments}}}});
    EXPECT_TRUE(answer && answer->contains("result")) << (answer ? answer->dump() : "none");
    return answer && answer->contains("result") ? (*answer)["result"] : json();
  }

  static std::string Texts(const json& result) {
    std::string all;
    for (const json& c : result["content"]) {
      if (c["type"] == "text") all += c["text"].get<std::string>() + "\n";
    }
    return all;
  }

  std::unique_ptr<Session> session_;
};

#define START(...)    \
  Start(__VA_ARGS__); \
  if (IsSkipped() || HasFatalFailure()) return

TEST_F(ToolsTest, RunPythonKeepsStateBetweenCalls) {
  START("python");
  json first = Call("run_python", {{"code", "x = 41"}});
  EXPECT_EQ(first["isError"], false) << first;
  json second = Call("run_python", {{"code", "print(x + 1)\nx * 2"}});
  EXPECT_EQ(second["isError"], false) << second;
  EXPECT_EQ(second["content"][0]["text"], "42\n") << second;
  EXPECT_EQ(second["content"][1]["text"], "82") << second;
}

TEST_F(ToolsTest, AnExceptionIsAToolErrorWithItsTraceback) {
  START("python");
  json result = Call("run_python", {{"code", "print('before')\n1 / 0"}});
  EXPECT_EQ(result["isError"], true);
  const std::string text = Texts(result);
  EXPECT_NE(text.find("before"), std::string::npos) << text;
  EXPECT_NE(text.find("ZeroDivisionError: division by zero"), std::string::npos) << text;
  EXPECT_NE(text.find("Traceback"), std::string::npos) << text;
}

TEST_F(ToolsTest, ACellPastItsTimeoutIsInterruptedAndTheStateKept) {
  START("python");
  Call("run_python", {{"code", "y = 7"}});
  json slow = Call("run_python", {{"code", "import time\ntime.sleep(30)"}, {"timeout", 0.5}});
  EXPECT_EQ(slow["isError"], true);
  EXPECT_NE(Texts(slow).find("timeout of 0.5 s"), std::string::npos) << slow;
  EXPECT_EQ(Call("run_python", {{"code", "y"}})["content"][0]["text"], "7");
}

TEST_F(ToolsTest, AChartComesAsAPngImage) {
  START("python-data");
  json result = Call("run_python", {{"code",
                                     "import matplotlib.pyplot as plt\n"
                                     "plt.plot([1, 2, 3], [1, 4, 9])\nplt.show()"}});
  EXPECT_EQ(result["isError"], false) << Texts(result);
  int images = 0;
  for (const json& c : result["content"]) {
    if (c["type"] != "image") continue;
    ++images;
    EXPECT_EQ(c["mimeType"], "image/png");
    auto png = cell_images::DecodeBase64(c["data"].get<std::string>(), 16 << 20);
    ASSERT_TRUE(png.ok()) << png.status().ToString();
    auto size = cell_images::PngSize(*png);
    ASSERT_TRUE(size.ok() && size->has_value());
    EXPECT_GT((*size)->width, 0u);
  }
  EXPECT_EQ(images, 1) << result;
}

TEST_F(ToolsTest, RunCommandGivesExitCodeAndOutput) {
  START("python");
  json ok = Call("run_command", {{"argv", {"echo", "hi there"}}});
  EXPECT_EQ(ok["isError"], false);
  EXPECT_EQ(ok["content"][0]["text"], "hi there\n");
  EXPECT_NE(Texts(ok).find("[exit code 0]"), std::string::npos);
  json failed = Call("run_command", {{"cmd", "echo oops >&2; exit 3"}});
  EXPECT_EQ(failed["isError"], true);
  EXPECT_NE(Texts(failed).find("[stderr]\noops"), std::string::npos) << failed;
  EXPECT_NE(Texts(failed).find("[exit code 3]"), std::string::npos) << failed;
  json missing = Call("run_command", {{"argv", {"no-such-program"}}});
  EXPECT_EQ(missing["isError"], true) << missing;
}

TEST_F(ToolsTest, WriteReadAndListFiles) {
  START("python");
  json wrote = Call("write_file", {{"path", "sub/notes.txt"}, {"content", "héllo\nworld\n"}});
  EXPECT_EQ(wrote["isError"], false) << wrote;
  json read = Call("read_file", {{"path", "/work/sub/notes.txt"}});
  EXPECT_EQ(read["isError"], false);
  EXPECT_EQ(read["content"][0]["text"], "héllo\nworld\n");
  // The file is the cell's too: one box per session.
  EXPECT_EQ(Call("run_python",
                 {{"code", "open('sub/notes.txt').read().split()[1]"}})["content"][0]["text"],
            "'world'");
  json listed = Call("list_files", json::object());
  EXPECT_NE(Texts(listed).find("sub/"), std::string::npos) << listed;
  json sub = Call("list_files", {{"path", "sub"}});
  EXPECT_NE(Texts(sub).find("13  notes.txt"), std::string::npos) << sub;
  json missing = Call("read_file", {{"path", "nope.txt"}});
  EXPECT_EQ(missing["isError"], true);
  Call("run_python", {{"code", "open('b.bin','wb').write(bytes(range(256)))"}});
  // A PNG comes back as an image (the one written here is checked only for its header).
  Call("run_python", {{"code",
                       "import struct, zlib\n"
                       "ihdr = struct.pack('>IIBBBBB', 2, 3, 8, 2, 0, 0, 0)\n"
                       "open('tiny.png','wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + "
                       "struct.pack('>I', 13) + b'IHDR' + ihdr + struct.pack('>I', "
                       "zlib.crc32(b'IHDR' + ihdr)))"}});
  json png = Call("read_file", {{"path", "tiny.png"}});
  ASSERT_EQ(png["content"].size(), 2u) << png;
  EXPECT_EQ(png["content"][1]["type"], "image") << png;
  EXPECT_EQ(png["content"][1]["mimeType"], "image/png");
  json binary = Call("read_file", {{"path", "b.bin"}});
  EXPECT_EQ(binary["isError"], false);
  EXPECT_NE(Texts(binary).find("binary (256 bytes"), std::string::npos) << binary;
}

TEST_F(ToolsTest, ResetClearsVariablesAndFiles) {
  START("python");
  Call("run_python", {{"code", "z = 1"}});
  Call("write_file", {{"path", "keep.txt"}, {"content", "x"}});
  json reset = Call("reset", json::object());
  EXPECT_EQ(reset["isError"], false);
  json z = Call("run_python", {{"code", "z"}});
  EXPECT_EQ(z["isError"], true);
  EXPECT_NE(Texts(z).find("NameError"), std::string::npos) << z;
  EXPECT_EQ(Call("read_file", {{"path", "keep.txt"}})["isError"], true);
}

TEST_F(ToolsTest, HostileOutputStaysWithinTheCaps) {
  SessionOptions options;
  options.max_text_bytes = 4096;
  options.max_image_bytes = 64 << 10;
  START("python", options);
  json flood =
      Call("run_python",
           {{"code", "import sys\nfor _ in range(100):\n  sys.stdout.write('x' * (1 << 20))"},
            {"timeout", 60}});
  const std::string flooded = flood.dump();
  EXPECT_LT(flooded.size(), 16u << 10) << "a result must keep max_text_bytes of a text";
  EXPECT_NE(flooded.find("more bytes cut"), std::string::npos);
  // A fake image: not a PNG, and one over the size cap; and escape codes in the text.
  json fake = Call("run_python",
                   {{"code",
                     "from IPython.display import display\nimport base64\n"
                     "display({'image/png': base64.b64encode(b'not a png').decode()}, raw=True)\n"
                     "display({'image/png': base64.b64encode(b'\\x89PNG' * 40000).decode()},"
                     " raw=True)\nprint('\\x1b[31mred\\x1b[0m')"}});
  const std::string text = Texts(fake);
  // Thousands of small displayed values: their text together stays within the cap.
  json many = Call("run_python", {{"code", "for i in range(5000): display(i)"}});
  EXPECT_LT(many.dump().size(), 32u << 10);
  EXPECT_NE(Texts(many).find("more results left out"), std::string::npos);
  for (const json& c : fake["content"]) EXPECT_NE(c["type"], "image") << fake;
  EXPECT_NE(text.find("image/png left out: not a image/png"), std::string::npos) << text;
  EXPECT_NE(text.find("image/png left out: larger than"), std::string::npos) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << "escape codes must be escaped";
}

TEST_F(ToolsTest, CancelInterruptsARunningCellAndSendsNoAnswer) {
  START("python");
  Call("run_python", {{"code", "w = 5"}});
  std::optional<json> answer = json("not yet");
  std::thread call([&] {
    answer = session_->Handle(
        {{"jsonrpc", "2.0"},
         {"id", "slow"},
         {"method", "tools/call"},
         {"params",
          {{"name", "run_python"}, {"arguments", {{"code", "import time\ntime.sleep(60)"}}}}}});
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(session_->Handle({{"jsonrpc", "2.0"},
                                 {"method", "notifications/cancelled"},
                                 {"params", {{"requestId", "slow"}, {"reason", "test"}}}}));
  call.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_FALSE(answer.has_value()) << "a cancelled request gets no answer: " << answer->dump();
  EXPECT_EQ(Call("run_python", {{"code", "w"}})["content"][0]["text"], "5");
}

TEST_F(ToolsTest, CancelKillsARunningCommandAndSendsNoAnswer) {
  START("python");
  std::optional<json> answer = json("not yet");
  std::thread call([&] {
    answer =
        session_->Handle({{"jsonrpc", "2.0"},
                          {"id", 77},
                          {"method", "tools/call"},
                          {"params",
                           {{"name", "run_command"},
                            {"arguments", {{"cmd", "sleep 50 & sleep 60"}, {"timeout", 90}}}}}});
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const auto start = std::chrono::steady_clock::now();
  session_->Handle(
      {{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", 77}}}});
  call.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_FALSE(answer.has_value()) << answer->dump();
  // The whole group is gone, the background sleep too.
  json ps = Call("run_command", {{"cmd", "cat /proc/[0-9]*/comm"}});
  EXPECT_NE(Texts(ps).find("codebox-agent"), std::string::npos) << ps;
  EXPECT_EQ(Texts(ps).find("sleep"), std::string::npos) << ps;
}

}  // namespace
}  // namespace codebox::mcp
