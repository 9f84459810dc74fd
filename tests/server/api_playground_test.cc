// The playground's routes (GET / and /playground/<file>: no token, a strict policy) and
// POST /v1/ask against a scripted model (tests/llm/fake_openai_server.py) with real jail
// boxes: its events, its one box destroyed after, the key kept on the server.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "base/fs.h"
#include "tests/llm/fake_server.h"
#include "tests/server/server_fixture.h"

namespace codebox::testing {
namespace {

using nlohmann::json;

constexpr char kApiKey[] = "sk-playground-api-test-3e1d";

class PlaygroundTest : public ServerFixture {
 protected:
  void SetUp() override {
    tokens_ = {"playground-test-token"};
    ServerFixture::SetUp();
  }
  // GET target with no token at all.
  http::ClientResponse GetWithoutToken(const std::string& target) {
    http::ClientRequest request;
    request.target = target;
    auto response = UnixClient().Send(request);
    EXPECT_TRUE(response.ok()) << response.status().ToString();
    return response.ok() ? *response : http::ClientResponse{};
  }
};

TEST_F(PlaygroundTest, PageAndFilesNeedNoTokenAndCarryAStrictPolicy) {
  struct Want {
    const char* target;
    const char* type;
    const char* holds;
  };
  for (const Want& want : {Want{"/", "text/html", "/playground/playground.js"},
                           Want{"/playground/playground.js", "text/javascript", "textContent"},
                           Want{"/playground/playground.css", "text/css", ".cell"}}) {
    auto r = GetWithoutToken(want.target);
    ASSERT_EQ(r.status, 200) << want.target << ": " << r.body;
    EXPECT_EQ(r.headers["content-type"].rfind(want.type, 0), 0u) << want.target;
    EXPECT_NE(r.body.find(want.holds), std::string::npos) << want.target;
    const std::string& csp = r.headers["content-security-policy"];
    EXPECT_NE(csp.find("default-src 'self'"), std::string::npos) << csp;
    EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << csp;
    EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos) << csp;
    EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << csp;
    EXPECT_EQ(r.headers["cache-control"], "no-cache");
    EXPECT_EQ(r.headers["x-content-type-options"], "nosniff");
  }
  // The page's script never turns text into markup: box output reaches the page as text, as
  // an image or inside a sandboxed frame.
  std::string script = GetWithoutToken("/playground/playground.js").body;
  for (const char* sink : {"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                           "eval(", "new Function"}) {
    EXPECT_EQ(script.find(sink), std::string::npos) << "playground.js uses " << sink;
  }
  EXPECT_NE(script.find("sandbox: \"\""), std::string::npos) << "HTML frames are sandboxed";
  EXPECT_EQ(GetWithoutToken("/playground/other.js").status, 401) << "only the page is public";
  EXPECT_EQ(GetWithoutToken("/v1/boxes").status, 401) << "the API still needs the token";
}

TEST_F(PlaygroundTest, AskWithoutAModelSaysHowToConfigureOne) {
  auto r = Call("POST", "/v1/ask", "/v1/ask", R"j({"task": "add 1 and 1"})j");
  EXPECT_EQ(r.status, 409);
  std::string message = Json(r)["error"]["message"];
  EXPECT_NE(message.find("--model"), std::string::npos) << message;
  EXPECT_NE(message.find("--base-url"), std::string::npos) << message;
}

class AskTest : public PlaygroundTest {
 protected:
  void StartModel(const std::string& scenario) {
    Status started = model_.Start(scenario);
    ASSERT_TRUE(started.ok()) << started.ToString();
    ask_.configured = true;
    ask_.base_url = model_.base_url();
    ask_.model = "fake-model";
    ask_.api_key = kApiKey;
    PlaygroundTest::SetUp();
  }
  void SetUp() override {}  // StartModel sets the server up once the model runs

  // The model saw the key on every request, and nothing of the server's answer holds it.
  void ExpectKeyStayedOnTheServer(const std::string& answered) {
    auto requests = model_.Requests();
    ASSERT_FALSE(requests.empty());
    for (const json& r : requests) {
      EXPECT_EQ(r["headers"].value("Authorization", ""), std::string("Bearer ") + kApiKey);
    }
    EXPECT_EQ(answered.find(kApiKey), std::string::npos);
  }

  static std::set<std::string> AskTempDirs() {
    std::set<std::string> dirs;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(base::TempRoot(), ec)) {
      std::string name = e.path().filename().string();
      if (name.rfind("codebox-ask-", 0) == 0) dirs.insert(name);
    }
    return dirs;
  }

  llm::testing::FakeServer model_;
};

TEST_F(AskTest, StreamsEachStepAndDestroysItsBox) {
  StartModel("chart_image.json");
  if (IsSkipped()) return;
  std::set<std::string> temp_before = AskTempDirs();
  std::vector<Event> events = Stream("/v1/ask", R"j({"task": "draw a chart"})j");
  ASSERT_FALSE(events.empty());
  std::string names;  // a run of `text` events as one
  std::string answered;
  std::string streamed;
  std::string last;
  for (const Event& e : events) {
    if (e.name != "text" || last != "text") names += e.name + " ";
    last = e.name;
    if (e.name == "text") streamed += e.data["text"].get<std::string>();
    answered += e.data.dump();
  }
  EXPECT_EQ(names, "box code result code result text answer done ") << answered;
  EXPECT_EQ(streamed, "The chart is saved.") << "the model's words stream as they come";
  EXPECT_EQ(events[0].data["driver"], "jail");
  EXPECT_EQ(events[1].data["step"], 1);
  EXPECT_NE(events[1].data["code"].get<std::string>().find("display(Image"), std::string::npos);
  const json& first = events[2].data;
  EXPECT_EQ(first["result"]["logs"]["stdout"][0], "shown\n");
  ASSERT_EQ(first["result"]["results"].size(), 1u) << first.dump();
  EXPECT_EQ(
      first["result"]["results"][0]["data"]["image/png"].get<std::string>().rfind("iVBORw0KGgo", 0),
      0u)
      << "the chart comes to the page as its base64 PNG";
  std::string why = openapi_.CheckValue(openapi_.Schema("AskStep"), first, "result");
  EXPECT_EQ(why, "");
  EXPECT_EQ(events[events.size() - 2].data["text"], "The chart is saved.");
  EXPECT_EQ(events[events.size() - 2].data["stop_reason"], "answer");
  EXPECT_EQ(events.back().data["model"], "fake-model");
  EXPECT_EQ(events.back().data["driver"], "jail");
  EXPECT_EQ(openapi_.CheckValue(openapi_.Schema("AskResult"), events.back().data, "done"), "");
  EXPECT_EQ(registry_->box_count(), 0u) << "the ask's box is destroyed after it";
  EXPECT_EQ(AskTempDirs(), temp_before) << "the images saved on the host are removed";
  ExpectKeyStayedOnTheServer(answered);
}

TEST_F(AskTest, AClientThatLeavesEndsTheAskAndItsBox) {
  StartModel("ask_client_leaves.json");  // its cell sleeps 120 s
  if (IsSkipped()) return;
  http::ClientRequest request;
  request.method = "POST";
  request.target = "/v1/ask";
  request.body = R"j({"task": "take your time"})j";
  request.headers = {{"Accept", "text/event-stream"}};
  auto start = std::chrono::steady_clock::now();
  bool saw_code = false;
  auto left =
      UnixClient(tokens_[0]).SendForEvents(request, [&](std::string_view name, std::string_view) {
        if (name != "code") return Status::Ok();
        saw_code = true;
        return IoError("the test leaves once the code runs");
      });
  EXPECT_FALSE(left.ok());
  ASSERT_TRUE(saw_code);
  while (registry_->box_count() > 0 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(registry_->box_count(), 0u) << "the ask's box outlived its client";
  // Well before the cell's own limit (the boxes' exec_timeout, 20 s) would have ended it.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST_F(AskTest, AnswersJsonWithoutAnEventStream) {
  StartModel("tool_then_answer.json");
  if (IsSkipped()) return;
  auto r = Call("POST", "/v1/ask", "/v1/ask", R"j({"task": "sum 0..100"})j");
  ASSERT_EQ(r.status, 200) << r.body;
  json body = Json(r);
  EXPECT_EQ(body["answer"], "The sum of 0..100 is 5050.");
  ASSERT_EQ(body["steps"].size(), 2u) << r.body;
  EXPECT_EQ(body["steps"][0]["result"]["logs"]["stdout"][0], "5050\n");
  EXPECT_EQ(registry_->box_count(), 0u);
  ExpectKeyStayedOnTheServer(r.body);

  auto unknown = Call("POST", "/v1/ask", "/v1/ask", R"j({"tsk": "x"})j");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_NE(unknown.body.find("'task'"), std::string::npos) << unknown.body;
  EXPECT_EQ(Call("POST", "/v1/ask", "/v1/ask", R"j({"task": " \n"})j").status, 400);
  EXPECT_EQ(Call("POST", "/v1/ask", "/v1/ask", R"j({"task": 1})j").status, 400);
}

}  // namespace
}  // namespace codebox::testing
