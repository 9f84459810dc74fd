// The stdio transport over pipes, with a session that makes no box: lines in, lines out.
#include "mcp/stdio.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>
#include <thread>

#include "mcp/jsonrpc.h"

namespace codebox::mcp {
namespace {

using nlohmann::json;

class NoBoxes final : public BoxSource {
 public:
  StatusOr<std::shared_ptr<Box>> Open() override { return Unavailable("no boxes here"); }
  void Close(std::shared_ptr<Box>) override {}
};

struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() { EXPECT_EQ(::pipe(fd), 0); }
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  void CloseWrite() {
    ::close(fd[1]);
    fd[1] = -1;
  }
};

void WriteAll(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    ASSERT_GT(n, 0);
    text.remove_prefix(static_cast<size_t>(n));
  }
}

std::vector<json> ReadLines(int fd) {
  std::string all;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) all.append(buffer, n);
  std::vector<json> lines;
  std::istringstream in(all);
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

const char kInitialize[] =
    R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",)"
    R"("capabilities":{},"clientInfo":{"name":"t","version":"1"}}})";

TEST(StdioTest, AnswersLinesSkipsGarbageAndEndsAtEof) {
  Session session({}, std::make_unique<NoBoxes>());
  Pipe in, out;
  StdioOptions options;
  options.max_line_bytes = 1 << 20;
  StdioEnd end = StdioEnd::kBusy;
  std::thread server([&] {
    end = ServeStdio(session, in.fd[0], out.fd[1], -1, options);
    ::close(out.fd[1]);
    out.fd[1] = -1;
  });
  std::string input = std::string(kInitialize) + "\n";
  input += "\r\n\n   \n";                     // blank lines: nothing
  input += "garbage {\n";                     // -32700
  input += std::string(3 << 20, 'x') + "\n";  // too long: one error, the rest skipped
  input += R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
           "\n";
  input += R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})"
           "\r\n";
  input += R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope"}})"
           "\n";
  input += R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_python",)"
           R"("arguments":{"code":"1"}}})"
           "\n";
  input += R"([1,2])"
           "\n";
  std::thread writer([&] {
    WriteAll(in.fd[1], input);
    in.CloseWrite();
  });
  std::vector<json> lines = ReadLines(out.fd[0]);
  writer.join();
  server.join();
  EXPECT_EQ(end, StdioEnd::kDone);
  ASSERT_EQ(lines.size(), 7u) << json(lines).dump();
  std::map<std::string, json> by_id;
  std::vector<int> null_id_codes;
  for (const json& line : lines) {
    EXPECT_EQ(line["jsonrpc"], "2.0");
    if (line["id"].is_null()) {
      null_id_codes.push_back(line["error"]["code"]);
    } else {
      by_id[line["id"].dump()] = line;
    }
  }
  EXPECT_EQ(null_id_codes, (std::vector<int>{kParseError, kInvalidRequest, kInvalidRequest}));
  EXPECT_EQ(by_id["1"]["result"]["protocolVersion"], "2025-11-25");
  EXPECT_EQ(by_id["2"]["result"]["tools"].size(), 6u);
  EXPECT_EQ(by_id["3"]["error"]["code"], kInvalidParams);
  EXPECT_EQ(by_id["4"]["result"]["isError"], true);  // no box here
}

TEST(StdioTest, StopFdEndsTheServerWhileStdinStaysOpen) {
  Session session({}, std::make_unique<NoBoxes>());
  Pipe in, out, stop;
  StdioEnd end = StdioEnd::kBusy;
  std::thread server([&] { end = ServeStdio(session, in.fd[0], out.fd[1], stop.fd[0]); });
  WriteAll(in.fd[1], std::string(kInitialize) + "\n");
  char byte;
  ASSERT_GT(::read(out.fd[0], &byte, 1), 0);  // the initialize answer began
  WriteAll(stop.fd[1], "x");
  server.join();
  EXPECT_EQ(end, StdioEnd::kDone);
}

TEST(StdioTest, AStopEndsTheServerWhenTheClientStopsReading) {
  Session session({}, std::make_unique<NoBoxes>());
  Pipe in, out, stop;
  StdioEnd end = StdioEnd::kBusy;
  std::thread server([&] { end = ServeStdio(session, in.fd[0], out.fd[1], stop.fd[0]); });
  // Far more answer bytes than the out pipe holds, and nobody reads them.
  std::string requests = std::string(kInitialize) + "\n";
  for (int i = 0; i < 100; ++i) {
    requests += R"({"jsonrpc":"2.0","id":)" + std::to_string(i + 10) +
                R"(,"method":"tools/list"})"
                "\n";
  }
  WriteAll(in.fd[1], requests);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  WriteAll(stop.fd[1], "x");
  server.join();
  EXPECT_EQ(end, StdioEnd::kDone);
}

TEST(StdioTest, AClosedOutputEndsTheServer) {
  Session session({}, std::make_unique<NoBoxes>());
  Pipe in, out;
  ::close(out.fd[0]);
  out.fd[0] = -1;
  signal(SIGPIPE, SIG_IGN);
  StdioEnd end = StdioEnd::kBusy;
  std::thread server([&] { end = ServeStdio(session, in.fd[0], out.fd[1], -1); });
  WriteAll(in.fd[1], std::string(kInitialize) + "\n");
  server.join();  // returns without stdin ending: nobody reads the answers
  EXPECT_EQ(end, StdioEnd::kDone);
}

}  // namespace
}  // namespace codebox::mcp
