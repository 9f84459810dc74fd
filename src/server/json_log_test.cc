// JsonLog: the line format, and the library's CODEBOX_LOG routed into it.
#include "server/json_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace codebox::server {
namespace {

TEST(JsonLogTest, OneObjectPerLineWithFixedKeysFirst) {
  const std::string line = JsonLog::Format(
      std::chrono::system_clock::time_point{}, base::LogLevel::kWarn, "box \"x\"\ndestroyed",
      {{"box", "b-0123456789abcdef"}, {"status", 404}, {"ms", 1.5}, {"msg", "ignored"}});
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_TRUE(line.starts_with(R"({"time":"1970-01-01T00:00:00.000Z","level":"warn","msg":)"))
      << line;
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["msg"], "box \"x\"\ndestroyed");
  EXPECT_EQ(j["box"], "b-0123456789abcdef");
  EXPECT_EQ(j["status"], 404);
  EXPECT_EQ(j["ms"], 1.5);
}

TEST(JsonLogTest, TextThatIsNotUtf8IsReplaced) {
  const std::string line =
      JsonLog::Format({}, base::LogLevel::kInfo, "bad \xff\xfe bytes", {{"path", "/x\xc3"}});
  auto j = nlohmann::json::parse(line);  // would throw on invalid UTF-8
  EXPECT_EQ(j["msg"], "bad \xEF\xBF\xBD\xEF\xBF\xBD bytes");
}

TEST(JsonLogTest, LibraryLogLinesBecomeJsonInTheLogFile) {
  char path[] = "/tmp/codebox-json-log-test-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  ASSERT_TRUE(JsonLog::OpenFile(path).ok());
  JsonLog::RouteLibraryLog();
  CODEBOX_LOG(kError, "from the library " << 7);
  JsonLog::Write(base::LogLevel::kDebug, "below the level: dropped");
  JsonLog::Write(base::LogLevel::kInfo, "box created", {{"box", "b-1"}});
  base::SetLogSink(nullptr);
  ASSERT_TRUE(JsonLog::OpenFile("/dev/null").ok());
  std::ifstream in(path);
  std::string line;
  std::vector<nlohmann::json> lines;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  ::unlink(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["level"], "error");
  EXPECT_EQ(lines[0]["msg"], "from the library 7");
  EXPECT_EQ(lines[0]["src"], "lib");
  EXPECT_EQ(lines[1]["msg"], "box created");
  EXPECT_EQ(lines[1]["box"], "b-1");
  EXPECT_FALSE(JsonLog::OpenFile("/nonexistent-dir/x.log").ok());
}

}  // namespace
}  // namespace codebox::server
