#include "e2b/process.h"

#include <gtest/gtest.h>

#include "base/json.h"
#include "base/text.h"

namespace codebox::e2b {
namespace {

using nlohmann::json;

json Parse(std::string_view text) { return base::ParseJsonOrDiscarded(text); }

TEST(ProcessMessagesTest, StartAsTheSdkSendsIt) {
  auto start = ProcessStartFromJson(Parse(
      R"({"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi"],"envs":{"X":"1"},"cwd":"/tmp"},"stdin":false})"));
  ASSERT_TRUE(start.ok()) << start.status().ToString();
  EXPECT_EQ(start->argv, (std::vector<std::string>{"/bin/bash", "-l", "-c", "echo hi"}));
  EXPECT_EQ(start->envs.at("X"), "1");
  EXPECT_EQ(start->cwd, "/tmp");
  EXPECT_FALSE(start->stdin_open);
  EXPECT_FALSE(start->pty.has_value());
  // A terminal's input is open whatever "stdin" says.
  auto pty = ProcessStartFromJson(Parse(
      R"({"process":{"cmd":"/bin/bash","args":["-i","-l"]},"pty":{"size":{"cols":80,"rows":24}}})"));
  ASSERT_TRUE(pty.ok()) << pty.status().ToString();
  ASSERT_TRUE(pty->pty.has_value());
  EXPECT_EQ(pty->pty->cols, 80);
  EXPECT_EQ(pty->pty->rows, 24);
  EXPECT_TRUE(pty->stdin_open);
}

TEST(ProcessMessagesTest, HostileStartsAreRefusedNamingTheField) {
  for (const char* body : {
           R"([])",
           R"({})",
           R"({"process":{"cmd":""}})",
           R"({"process":{"cmd":7}})",
           R"({"process":{"cmd":"sh","args":"x"}})",
           R"({"process":{"cmd":"sh","envs":{"A=B":"1"}}})",
           R"({"process":{"cmd":"sh","envs":{"A":1}}})",
           R"({"process":{"cmd":"sh"},"pty":{"size":{"cols":0,"rows":24}}})",
           R"({"process":{"cmd":"sh"},"pty":{"size":{"cols":80,"rows":100000}}})",
           R"({"process":{"cmd":"sh"},"stdin":"yes"})",
       }) {
    auto start = ProcessStartFromJson(Parse(body));
    EXPECT_FALSE(start.ok()) << body;
    EXPECT_EQ(start.status().code(), StatusCode::kInvalidArgument) << body;
  }
  json many = {{"process", {{"cmd", "sh"}, {"args", json::array()}}}};
  for (size_t i = 0; i <= kMaxArgs; ++i) many["process"]["args"].push_back("a");
  EXPECT_FALSE(ProcessStartFromJson(many).ok());
  json nul = {{"process", {{"cmd", std::string("a\0b", 3)}}}};
  EXPECT_FALSE(ProcessStartFromJson(nul).ok()) << "a NUL in argv";
}

TEST(ProcessMessagesTest, SelectorsInputsSignalsAndResizes) {
  EXPECT_EQ(*ProcessPidFromJson(Parse(R"({"process":{"pid":42}})")), 42);
  EXPECT_EQ(*ProcessPidFromJson(Parse(R"({"process":{"pid":"42"}})")), 42);
  for (const char* bad :
       {R"({"process":{"pid":0}})", R"({"process":{"pid":-1}})", R"({"process":{"pid":99999999}})",
        R"({"process":{"tag":"x"}})", R"({"process":{"pid":"4x"}})", R"({})"}) {
    EXPECT_FALSE(ProcessPidFromJson(Parse(bad)).ok()) << bad;
  }
  auto input = ProcessInputFromJson(Parse(R"({"process":{"pid":3},"input":{"stdin":"YWJjCg=="}})"));
  ASSERT_TRUE(input.ok());
  EXPECT_EQ(input->pid, 3);
  EXPECT_EQ(input->bytes, "abc\n");
  auto typed = ProcessInputFromJson(Parse(R"({"process":{"pid":3},"input":{"pty":"BA=="}})"));
  ASSERT_TRUE(typed.ok());
  EXPECT_EQ(typed->bytes, "\x04");
  EXPECT_FALSE(ProcessInputFromJson(Parse(R"({"process":{"pid":3},"input":{"stdin":"!!"}})")).ok());
  json big = {{"process", {{"pid", 3}}},
              {"input", {{"stdin", std::string((kMaxInputBytes / 3 + 2) * 4, 'A')}}}};
  EXPECT_FALSE(ProcessInputFromJson(big).ok()) << "past the input bound";

  EXPECT_EQ(
      ProcessSignalFromJson(Parse(R"({"process":{"pid":3},"signal":"SIGNAL_SIGKILL"})"))->signal,
      9);
  EXPECT_EQ(ProcessSignalFromJson(Parse(R"({"process":{"pid":3},"signal":15})"))->signal, 15);
  EXPECT_FALSE(
      ProcessSignalFromJson(Parse(R"({"process":{"pid":3},"signal":"SIGNAL_SIGSTOP"})")).ok());
  EXPECT_FALSE(ProcessSignalFromJson(Parse(R"({"process":{"pid":3}})")).ok());

  auto resize = ProcessUpdateFromJson(
      Parse(R"({"process":{"pid":3},"pty":{"size":{"cols":100,"rows":30}}})"));
  ASSERT_TRUE(resize.ok());
  ASSERT_TRUE(resize->size.has_value());
  EXPECT_EQ(resize->size->cols, 100);
  EXPECT_FALSE(ProcessUpdateFromJson(Parse(R"({"process":{"pid":3}})"))->size.has_value());
}

TEST(ProcessMessagesTest, EventsAsEnvdWritesThem) {
  EXPECT_EQ(StartEventJson(42), R"({"event":{"start":{"pid":42}}})");
  EXPECT_EQ(DataEventJson(DataStream::kStdout, "hello\n"),
            R"({"event":{"data":{"stdout":"aGVsbG8K"}}})");
  EXPECT_EQ(DataEventJson(DataStream::kPty, "\x1b"), R"({"event":{"data":{"pty":"Gw=="}}})");
  ExecResult ok;
  ok.exit_code = 0;
  json end = Parse(EndEventJson(ok))["event"]["end"];
  EXPECT_EQ(end["exitCode"], 0);
  EXPECT_EQ(end["exited"], true);
  EXPECT_FALSE(end.contains("error"));
  ExecResult three;
  three.exit_code = 3;
  end = Parse(EndEventJson(three))["event"]["end"];
  EXPECT_EQ(end["status"], "exit status 3");
  EXPECT_EQ(end["error"], "exit status 3");
  ExecResult killed;
  killed.exit_code = -1;
  killed.signal = 9;
  killed.timed_out = true;
  end = Parse(EndEventJson(killed))["event"]["end"];
  EXPECT_EQ(end["exitCode"], -1);
  EXPECT_EQ(end["exited"], false);
  EXPECT_EQ(end["status"], "signal: killed");
  EXPECT_NE(end["error"].get<std::string>().find("timeout"), std::string::npos);
}

TEST(ProcessMessagesTest, ListShowsRunningProcessesOnly) {
  ProcessInfo running;
  running.pid = 7;
  running.argv = {"/bin/bash", "-c", "sleep 9"};
  ProcessInfo ended;
  ended.pid = 8;
  ended.argv = {"true"};
  ended.running = false;
  json list = ProcessListToJson({running, ended});
  ASSERT_EQ(list["processes"].size(), 1u);
  EXPECT_EQ(list["processes"][0]["pid"], 7);
  EXPECT_EQ(list["processes"][0]["config"]["cmd"], "/bin/bash");
  EXPECT_EQ(list["processes"][0]["config"]["args"], (json{"-c", "sleep 9"}));
}

TEST(UserFromAuthorization, TakesTheSdksBasicHeaderAndNothingElse) {
  EXPECT_EQ(*UserFromAuthorization(""), "");
  EXPECT_EQ(*UserFromAuthorization("Basic dXNlcjo="), "user");   // base64("user:")
  EXPECT_EQ(*UserFromAuthorization("Basic cm9vdDo="), "root");   // base64("root:")
  EXPECT_EQ(*UserFromAuthorization("Basic YXBwXzE="), "app_1");  // no colon at all
  for (std::string_view bad :
       {"Bearer dXNlcjo=", "Basic", "Basic !!!", "Basic Li4vZXRjOg==" /* "../etc:" */,
        "Basic OjA=" /* ":0" */, "Basic VVNFUjo=" /* "USER:" */}) {
    auto user = UserFromAuthorization(bad);
    EXPECT_FALSE(user.ok()) << bad;
    EXPECT_EQ(user.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(UserFromAuthorization("Basic " + std::string(400, 'A')).ok());
  EXPECT_FALSE(
      UserFromAuthorization("Basic " + base::EncodeBase64(std::string(40, 'a') + ":")).ok());
}

}  // namespace
}  // namespace codebox::e2b
