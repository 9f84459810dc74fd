// openapi.json against the API's own encoders (src/api), field by field: every field an
// encoder writes is a property of its schema, every property of the schema is one the encoder
// writes, a field is required exactly when the encoder always writes it, and what it writes
// has the schema's JSON types (nested objects, list items and oneOf included). A field added,
// dropped or retyped on one side only fails here.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "api/ask.h"
#include "api/box_record.h"
#include "api/egress_record.h"
#include "api/error.h"
#include "api/exec_result.h"
#include "api/execution.h"
#include "api/file_entry.h"
#include "api/files_query.h"
#include "api/node_load.h"
#include "api/process_info.h"
#include "api/requests.h"
#include "api/run_result.h"
#include "api/server_status.h"
#include "api/text_event.h"
#include "tests/server/openapi_check.h"

namespace codebox::testing {
namespace {

using nlohmann::json;

// `schema`'s properties and required names, through $ref and allOf.
void Collect(const OpenApiChecker& doc, const json& schema, std::map<std::string, json>* props,
             std::set<std::string>* required) {
  const json& s = doc.Resolve(schema);
  const json none = json::array();
  for (const json& part : s.value("allOf", none)) Collect(doc, part, props, required);
  const json properties = s.value("properties", json::object());
  for (const auto& [name, sub] : properties.items()) (*props)[name] = sub;
  for (const json& name : s.value("required", none)) required->insert(name);
}

// The object schema a value of `schema` is, when it is one with properties: through $ref,
// and through a oneOf of that schema and null ({"oneOf": [{"type": "null"}, {"$ref": ...}]}).
const json* ObjectSchema(const OpenApiChecker& doc, const json& schema) {
  const json& s = doc.Resolve(schema);
  if (s.contains("properties") || s.contains("allOf")) return &s;
  if (!s.contains("oneOf")) return nullptr;
  for (const json& choice : s["oneOf"]) {  // by reference: the answer points into the document
    if (const json* o = ObjectSchema(doc, choice)) return o;
  }
  return nullptr;
}

// A property's schema says which JSON type its value has.
bool Typed(const OpenApiChecker& doc, const json& schema) {
  const json& s = doc.Resolve(schema);
  if (s.contains("type") || s.contains("enum") || s.contains("const") || s.contains("allOf")) {
    return true;
  }
  const json choices = s.value("oneOf", json::array());
  return !choices.empty() &&
         std::all_of(choices.begin(), choices.end(), [&](const json& c) { return Typed(doc, c); });
}

// `full` (an encoder's output with every optional field present) and `minimal` (with none)
// against `schema`, recursively: names both ways, required = always written, types. Not
// `exact` (an item of a list the minimal side has no item of: a listed box has no "egress",
// an ask's steps are left out of its `done`): only that what `full` writes is documented,
// with its types.
void Compare(const OpenApiChecker& doc, const json& schema, const json& full, const json& minimal,
             const std::string& where, bool exact = true) {
  ASSERT_TRUE(full.is_object()) << where;
  ASSERT_TRUE(minimal.is_object()) << where;
  std::map<std::string, json> props;
  std::set<std::string> required;
  Collect(doc, schema, &props, &required);
  for (const auto& [field, value] : full.items()) {
    EXPECT_TRUE(props.count(field))
        << where << ": the encoder writes '" << field << "', which openapi.json does not document";
  }
  EXPECT_EQ(doc.CheckValue(schema, full, where), "");
  if (!exact) {
    for (const auto& [field, value] : full.items()) {
      if (props.count(field)) {
        EXPECT_TRUE(Typed(doc, props[field])) << where << "." << field << ": no JSON type";
      }
    }
  }
  for (const auto& [field, sub] : exact ? props : std::map<std::string, json>{}) {
    EXPECT_TRUE(full.contains(field))
        << where << ": openapi.json documents '" << field << "', which the encoder never writes";
    EXPECT_TRUE(Typed(doc, sub)) << where << "." << field << ": no JSON type in openapi.json";
  }
  if (exact) {
    for (const auto& [field, value] : minimal.items()) {
      EXPECT_TRUE(required.count(field)) << where << ": the encoder always writes '" << field
                                         << "', which openapi.json does not require";
    }
    for (const std::string& field : required) {
      EXPECT_TRUE(minimal.contains(field))
          << where << ": openapi.json requires '" << field << "', which the encoder may leave out";
    }
    EXPECT_EQ(doc.CheckValue(schema, minimal, where + " (minimal)"), "");
  }
  // Into nested objects and lists of objects: the minimal side where it has one, else the full
  // one (for a list's item, then only names and types are compared).
  for (const auto& [field, value] : full.items()) {
    if (!props.count(field)) continue;
    const json& sub = props[field];
    const json& low = minimal.contains(field) ? minimal[field] : value;
    if (value.is_object()) {
      if (const json* o = ObjectSchema(doc, sub)) {
        Compare(doc, *o, value, low.is_object() ? low : value, where + "." + field, exact);
      }
    } else if (value.is_array() && !value.empty() && value[0].is_object()) {
      const json& s = doc.Resolve(sub);
      ASSERT_TRUE(s.contains("items")) << where << "." << field;
      const json* o = ObjectSchema(doc, s["items"]);
      ASSERT_NE(o, nullptr) << where << "." << field << ": a list of objects without properties";
      const bool has_low = exact && minimal.contains(field) && low.is_array() && !low.empty();
      Compare(doc, *o, value[0], has_low ? low[0] : value[0], where + "." + field + "[0]", has_low);
    }
  }
}

void ExpectSameFields(const std::string& name, const json& full, const json& minimal) {
  OpenApiChecker doc;
  Compare(doc, doc.Schema(name), full, minimal, name);
}

// A request body against its schema (`extra`: schemas whose properties it also takes, as
// RunRequest takes BoxOptions'): the properties openapi.json documents are exactly the fields
// (names and aliases) the decoder takes, what the encoder writes is documented, with the
// documented types, and a required field is one the encoder always writes.
void ExpectRequestFields(const std::string& name, const json& full, const json& minimal,
                         const std::vector<std::string>& extra = {}) {
  OpenApiChecker doc;
  std::map<std::string, json> props;
  std::set<std::string> required;
  Collect(doc, doc.Schema(name), &props, &required);
  for (const std::string& more : extra) {
    std::set<std::string> ignored;
    Collect(doc, doc.Schema(more), &props, &ignored);
  }
  const std::vector<std::string> names = api::RequestFieldNames(name);
  const std::set<std::string> taken(names.begin(), names.end());
  EXPECT_FALSE(taken.empty()) << name << ": api::RequestFieldNames knows no such request";
  for (const auto& [field, sub] : props) {
    EXPECT_TRUE(taken.count(field))
        << name << ": openapi.json documents '" << field << "', which the decoder refuses";
    EXPECT_TRUE(Typed(doc, sub)) << name << "." << field << ": no JSON type in openapi.json";
  }
  for (const std::string& field : taken) {
    EXPECT_TRUE(props.count(field))
        << name << ": the decoder takes '" << field << "', which openapi.json does not document";
  }
  for (const auto& [field, value] : full.items()) {
    EXPECT_TRUE(props.count(field))
        << name << ": the encoder writes '" << field << "', which openapi.json does not document";
  }
  for (const std::string& field : required) {
    EXPECT_TRUE(minimal.contains(field))
        << name << ": openapi.json requires '" << field << "', which the encoder may leave out";
  }
  EXPECT_EQ(doc.CheckValue(doc.Schema(name), full, name), "");
  EXPECT_EQ(doc.CheckValue(doc.Schema(name), minimal, name + " (minimal)"), "");
}

TEST(OpenApiTypesTest, Requests) {
  ExecOptions full;
  full.env = {{"A", "1"}};
  full.cwd = "/work";
  full.stdin_data = "in";
  full.timeout = std::chrono::milliseconds(1500);
  const std::vector<std::string> argv = {"echo", "hi"};
  ExpectRequestFields("ExecRequest", api::ExecRequestToJson({argv, full}),
                      api::ExecRequestToJson({argv, ExecOptions{}}));
  ExpectRequestFields("StartProcessRequest", api::StartRequestToJson({argv, full}),
                      api::StartRequestToJson({argv, ExecOptions{}}));
  ExpectRequestFields("PythonRequest", api::PythonRequestToJson({"print(1)", full}),
                      api::PythonRequestToJson({"print(1)", ExecOptions{}}));
  ExpectRequestFields("RunCodeRequest", api::CellRequestToJson({"1+1", kNoTimeout}),
                      api::CellRequestToJson({"1+1", std::nullopt}));
  ExpectRequestFields("StdinRequest", api::StdinRequestToJson({"x", true}),
                      api::StdinRequestToJson({}));
  ExpectRequestFields("SignalRequest", api::SignalRequestToJson(15), api::SignalRequestToJson(9));
  InstallOptions index;
  index.index_url = "http://127.0.0.1:1/simple";
  ExpectRequestFields("PackagesRequest", api::PackagesRequestToJson({{"pandas"}, index}),
                      api::PackagesRequestToJson({{"pandas"}, InstallOptions{}}));
  ExpectRequestFields("AskRequest", api::AskRequestToJson({"add 1 and 2"}),
                      api::AskRequestToJson({"add 1 and 2"}));
  ExpectRequestFields("BoxOptions", api::BoxOptionsRequestToJson(BoxOptions{}),
                      api::BoxOptionsRequestToJson(BoxOptions{}));
  ExecOptions run = full;
  run.cwd.clear();  // a one-shot run takes none
  auto run_full = api::RunRequestToJson({"print(1)", run, BoxOptions{}});
  auto run_minimal = api::RunRequestToJson({"print(1)", ExecOptions{}, BoxOptions{}});
  ASSERT_TRUE(run_full.ok() && run_minimal.ok()) << run_full.status().ToString();
  ExpectRequestFields("RunRequest", *run_full, *run_minimal, {"BoxOptions"});
}

TEST(OpenApiTypesTest, RequestDecodersReadWhatTheEncodersWriteAndRefuseTheRest) {
  ExecOptions o;
  o.env = {{"A", "1"}};
  o.stdin_data = std::string("a\0b", 3);
  o.timeout = kNoTimeout;
  o.ring_bytes = 4096;
  auto start = api::StartRequestFromJson(api::StartRequestToJson({{"sleep", "9"}, o}));
  ASSERT_TRUE(start.ok()) << start.status().ToString();
  EXPECT_EQ(start->argv, (std::vector<std::string>{"sleep", "9"}));
  EXPECT_EQ(start->options.env, o.env);
  EXPECT_EQ(start->options.stdin_data, o.stdin_data);
  EXPECT_EQ(start->options.timeout, kNoTimeout);
  EXPECT_TRUE(start->options.background);
  EXPECT_EQ(start->options.ring_bytes, 4096u);

  auto cell = api::CellRequestFromJson(api::CellRequestToJson({"1+1", std::chrono::seconds(2)}));
  ASSERT_TRUE(cell.ok()) << cell.status().ToString();
  EXPECT_EQ(cell->timeout, std::chrono::milliseconds(2000));
  auto signal = api::SignalRequestFromJson(json{{"signal", "SIGTERM"}});
  ASSERT_TRUE(signal.ok());
  EXPECT_EQ(*signal, 15);

  BoxOptions box;
  box.memory_mib = 256;
  box.env = {{"B", "2"}};
  ExecOptions exec;
  exec.env = {{"A", "1"}};
  exec.stdin_data = "in";
  auto run_json = api::RunRequestToJson({"print(1)", exec, box});
  ASSERT_TRUE(run_json.ok());
  auto run = api::RunRequestFromJson(*run_json, BoxOptions{});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->box.memory_mib, 256u);
  EXPECT_EQ(run->exec.env, (std::map<std::string, std::string>{{"A", "1"}, {"B", "2"}}));
  EXPECT_EQ(run->exec.stdin_data, "in");
  exec.cwd = "/tmp";
  EXPECT_EQ(api::RunRequestToJson({"x", exec, box}).status().code(), StatusCode::kInvalidArgument);

  // Wrong shapes are the client's error (400), naming the field.
  auto refused = [](const StatusOr<api::ExecRequest>& r) {
    return r.ok() ? std::string("accepted") : r.status().message();
  };
  EXPECT_NE(refused(api::ExecRequestFromJson(json{{"argv", json::array()}})).find("argv"),
            std::string::npos);
  EXPECT_NE(refused(api::ExecRequestFromJson(json{{"argv", {"ls"}}, {"cwdd", "/"}}))
                .find("did you mean 'cwd'"),
            std::string::npos);
  EXPECT_EQ(api::ExecRequestFromJson(json{{"argv", {1}}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(api::StartRequestFromJson(json{{"argv", {"ls"}}, {"background", false}})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(api::BoxOptionsRequestFromJson(json{{"token", "t"}}, BoxOptions{}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(api::AskRequestFromJson(json{{"task", " \n"}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(api::PackagesRequestFromJson(json{{"packages", {"x"}}, {"timeout", "none"}})
                .status()
                .code(),
            StatusCode::kInvalidArgument);

  // The files route's query.
  auto params = api::FilesQueryToParams({"a b/c", 0750, true});
  const std::map<std::string, std::string> by_name(params.begin(), params.end());
  EXPECT_EQ(by_name.at("mode"), "0750");
  auto files = api::FilesQueryFromParams(by_name);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(files->path, "a b/c");
  EXPECT_EQ(files->mode, 0750u);
  EXPECT_TRUE(files->list);
  EXPECT_FALSE(api::FilesQueryFromParams({{"path", "x"}, {"mode", "9"}}).ok());
  EXPECT_FALSE(api::FilesQueryFromParams({{"mode", "0644"}}).ok()) << "path is required";
}

// Every optional field present in `full`, none in `minimal`: the comparison sees both.
TEST(OpenApiTypesTest, ExecResult) {
  ExecResult r;
  r.stdout_data = std::string("\xff", 1);  // base64
  r.dropped_stdout = 1;
  r.dropped_stderr = 2;
  ExpectSameFields("ExecResult", api::ExecResultToJson(r), api::ExecResultToJson(ExecResult{}));
}

TEST(OpenApiTypesTest, ProcessAndProcessList) {
  ProcessInfo running;
  running.pid = 7;
  running.argv = {"sleep", "1"};
  ProcessInfo ended = running;
  ended.running = false;
  ended.exit = ExecResult{};
  ExpectSameFields("Process", api::ProcessInfoToJson(ended), api::ProcessInfoToJson(running));
  ExpectSameFields("ProcessList", api::ProcessListToJson({ended}),
                   api::ProcessListToJson({running}));
  json started = api::ProcessStartedToJson(7, {"sleep", "1"});
  ExpectSameFields("ProcessStarted", started, started);
}

TEST(OpenApiTypesTest, ExecutionAndCellResult) {
  Execution full;
  full.stdout_chunks = {"a"};
  full.stderr_chunks = {"b"};
  CellResult cell;
  cell.data = {{"text/plain", "2"}, {"image/png", "iVBORw0KGgo="}};
  cell.is_main_result = true;
  full.results = {cell};
  full.error = CellError{"ZeroDivisionError", "division by zero", "Traceback..."};
  full.driver = "jail";
  ExpectSameFields("Execution", api::ExecutionToJson(full), api::ExecutionToJson(Execution{}));
  ExpectSameFields("CellResult", api::CellResultToJson(cell), api::CellResultToJson(CellResult{}));
}

TEST(OpenApiTypesTest, BoxAndEgressRecord) {
  api::BoxRecord b;
  b.id = "b-0123456789abcdef.node-1";
  b.state = "idle";
  b.info.warnings = {"a vm restore fell back to a cold boot"};
  EgressRecord e{"pypi.org", 443, true, "allowed: pypi.org", "151.101.0.223", 10, 20};
  const std::vector<EgressRecord> log = {e};
  ExpectSameFields("Box", api::BoxToJson(b, &log), api::BoxToJson(b));
  ExpectSameFields("EgressRecord", api::EgressRecordToJson(e),
                   api::EgressRecordToJson(EgressRecord{}));
}

TEST(OpenApiTypesTest, FileListErrorAndTextEvent) {
  FileEntry f{"a.txt", "/work/a.txt", "file", 3, 0644};
  ExpectSameFields("FileList", api::FileListToJson({f}), api::FileListToJson({}));
  ExpectSameFields("FileEntry", api::FileEntryToJson(f),
                   api::FileEntryToJson(FileEntry{"x", "/x", "dir", 0, 0}));
  json error = api::ErrorToJson(NotFound("no box"));
  ExpectSameFields("Error", error, error);
  json text = api::TextEventToJson("hi");
  ExpectSameFields("StreamChunk", text, text);
}

TEST(OpenApiTypesTest, RunAndProcessResults) {
  ExecResult r;
  r.stdout_data = std::string("\xff", 1);
  r.dropped_stdout = 1;
  r.dropped_stderr = 2;
  const api::OneShotBox box{.driver = "jail", .from_pool = true};
  ExpectSameFields("RunResult", api::RunResultToJson(r, box), api::RunResultToJson({}, box));
  json one_shot = api::OneShotBoxToJson(box);
  ExpectSameFields("OneShotBox", one_shot, one_shot);
  ExpectSameFields("ProcessResult", api::ProcessResultToJson(7, r),
                   api::ProcessResultToJson(7, ExecResult{}));
}

api::AskStep FullStep() {
  Execution e;
  e.stdout_chunks = {"5050\n"};
  e.results = {CellResult{{{"text/plain", "5050"}}, true}};
  return {.index = 1,
          .kind = "tool",
          .code = "print(sum(range(101)))",
          .result = e,
          .error = "a tool call without code",
          .thinking = "sum it"};
}

api::AskResult FullAsk() {
  return {.answer = "5050",
          .stop_reason = "answer",
          .stop_detail = "",
          .mode = "tools",
          .model = "fake-model",
          .driver = "jail",
          .steps = {FullStep()},
          .duration = std::chrono::milliseconds(1200)};
}

TEST(OpenApiTypesTest, AskResultStepsAndEvents) {
  ExpectSameFields(
      "AskStep", api::AskStepToJson(FullStep()),
      api::AskStepToJson(api::AskStep{
          .index = 2, .kind = "answer", .code = "", .result = {}, .error = "", .thinking = ""}));
  // The JSON answer has its steps; the `done` event leaves them out.
  ExpectSameFields("AskResult", api::AskResultToJson(FullAsk()),
                   api::AskResultToJson(FullAsk(), /*with_steps=*/false));
  json code = api::AskCodeToJson({.step = 1, .code = "1+1"});
  ExpectSameFields("AskCode", code, code);
  json answer = api::AskAnswerToJson({.text = "2", .stop_reason = "answer", .stop_detail = ""});
  ExpectSameFields("AskAnswer", answer, answer);
}

api::BoxRecord ListedBox() {
  api::BoxRecord b;
  b.id = "b-0123456789abcdef.n1";
  b.tenant = "local";
  b.image = "python";
  b.info.driver = "jail";
  b.info.limits = {"memory 512 MiB"};
  b.state = "busy";
  b.from_pool = true;
  b.created_at = std::chrono::system_clock::from_time_t(1'796'300'000);
  b.last_used = b.created_at + std::chrono::seconds(5);
  b.requests = 3;
  return b;
}

const api::PoolStatus kPool{.spec = "python=2",
                            .image = "python",
                            .target = 2,
                            .ready = 1,
                            .starting = 1,
                            .taken = 4,
                            .last_error = "no kvm"};

const api::PeerStatus kDownPeer{.node = "n2",
                                .address = "10.0.0.2:8080",
                                .up = false,
                                .error = "connection refused",
                                .boxes = 0,
                                .max_boxes = 0,
                                .drivers = {},
                                .full = true,
                                .busy = false};

api::ServerStatus FullStatus() {
  api::ServerStatus full;
  full.version = "0.1.0";
  full.boxes = {ListedBox()};
  full.pools = {kPool};
  full.max_boxes = 64;
  full.listen = {"unix:/run/codebox/codebox.sock"};
  full.node = "n1";
  full.incarnation = "0123";
  full.drivers = {"jail"};
  full.peers = {kDownPeer};
  full.uptime = std::chrono::duration<double>(12.5);
  return full;
}

TEST(OpenApiTypesTest, HealthStatusPeersPoolsAndBoxList) {
  ExpectSameFields("Pool", api::PoolStatusToJson(kPool), api::PoolStatusToJson({}));
  ExpectSameFields("Health", api::HealthToJson({.boxes = 3, .pools = {kPool}}),
                   api::HealthToJson({}));
  api::PeerStatus up = kDownPeer;
  up.up = true;
  up.drivers = {"jail", "vm"};
  ExpectSameFields("Peer", api::PeerStatusToJson(kDownPeer), api::PeerStatusToJson(up));
  const api::ServerStatus full = FullStatus();
  ExpectSameFields("ServerStatus", api::ServerStatusToJson(full),
                   api::ServerStatusToJson(api::ServerStatus{}));
  ExpectSameFields("BoxList",
                   api::BoxListToJson({.boxes = {ListedBox()}, .unreachable = {"n2: refused"}}),
                   api::BoxListToJson({}));
}

TEST(OpenApiTypesTest, NodeLoad) {
  api::NodeLoad load{.node = "n1",
                     .incarnation = "0123",
                     .boxes = 3,
                     .max_boxes = 4,
                     .pool_ready = 1,
                     .cpu_pressure = 12.5,
                     .memory_pressure = 0,
                     .memory_available_bytes = 8ull << 30,
                     .drivers = {"jail"}};
  json j = api::NodeLoadToJson(load);
  ExpectSameFields("NodeLoad", j, j);
}

// The comparison itself fails on a difference (so a pass above means something).
TEST(OpenApiTypesTest, TheComparisonSeesEachKindOfDifference) {
  OpenApiChecker doc;
  json good = api::TextEventToJson("hi");
  auto failures = [&](const json& full, const json& minimal) {
    ::testing::TestPartResultArray results;
    {
      ::testing::ScopedFakeTestPartResultReporter reporter(
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
      Compare(doc, doc.Schema("StreamChunk"), full, minimal, "StreamChunk");
    }
    return results.size();
  };
  EXPECT_EQ(failures(good, good), 0);
  json extra = good;
  extra["more"] = 1;
  EXPECT_GT(failures(extra, good), 0);                           // a field the schema does not have
  EXPECT_GT(failures(json::object(), json::object()), 0);        // a property never written
  EXPECT_GT(failures(good, json::object()), 0);                  // required but left out
  EXPECT_GT(failures(json{{"text", 1}}, json{{"text", 1}}), 0);  // the wrong type
}

TEST(OpenApiTypesTest, TheDecodersReadWhatTheEncodersWrite) {
  ExecResult r;
  r.exit_code = -1;
  r.signal = 9;
  r.stdout_data = std::string("a\0\xff", 3);
  r.stderr_data = "err";
  r.duration = std::chrono::milliseconds(12);
  r.driver = "jail";
  r.dropped_stderr = 5;
  auto back = api::ExecResultFromJson(api::ExecResultToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->stdout_data, r.stdout_data);
  EXPECT_EQ(back->stderr_data, "err");
  EXPECT_EQ(back->signal, 9);
  EXPECT_EQ(back->duration, r.duration);
  EXPECT_EQ(back->dropped_stderr, 5u);
  json bad = api::ExecResultToJson(r);
  bad["stdout_encoding"] = "rot13";
  EXPECT_EQ(api::ExecResultFromJson(bad).status().code(), StatusCode::kProtocolError);
  bad = api::ExecResultToJson(r);
  bad["stdout"] = "***";
  EXPECT_EQ(api::ExecResultFromJson(bad).status().code(), StatusCode::kProtocolError);

  ProcessInfo p;
  p.pid = 9;
  p.argv = {"x"};
  auto list = api::ProcessListFromJson(api::ProcessListToJson({p}));
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].pid, 9);
  EXPECT_TRUE((*list)[0].running);
  auto pid = api::ProcessStartedFromJson(api::ProcessStartedToJson(9, {"x"}));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  EXPECT_EQ(*pid, 9);

  Execution e;
  e.stdout_chunks = {"1\n"};
  e.results = {CellResult{{{"text/plain", "2"}}, true}};
  e.error = CellError{"ValueError", "v", "tb"};
  e.execution_count = 3;
  auto cell = api::ExecutionFromJson(api::ExecutionToJson(e));
  ASSERT_TRUE(cell.ok()) << cell.status().ToString();
  EXPECT_EQ(cell->stdout_chunks, e.stdout_chunks);
  EXPECT_EQ(cell->text(), "2");
  ASSERT_TRUE(cell->error);
  EXPECT_EQ(cell->error->name, "ValueError");
  EXPECT_EQ(cell->execution_count, 3);

  api::BoxRecord b;
  b.id = "b-0123456789abcdef.n1";
  b.info.driver = "jail";
  b.info.limits = {"memory 512 MiB"};
  const std::vector<EgressRecord> log = {{"pypi.org", 443, false, "refused", "", 0, 0}};
  const json box = api::BoxToJson(b, &log);
  auto created = api::CreatedBoxFromJson(box);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(created->id, b.id);
  EXPECT_EQ(created->info.limits, b.info.limits);
  auto egress = api::EgressLogFromJson(box);
  ASSERT_TRUE(egress.ok()) << egress.status().ToString();
  ASSERT_EQ(egress->size(), 1u);
  EXPECT_EQ((*egress)[0].host, "pypi.org");
  EXPECT_EQ((*egress)[0].port, 443);
  b.tenant = "t";
  b.state = "idle";
  b.cpus = 1.5;
  b.memory_mib = 768;
  b.disk_mib = 300;
  auto record = api::BoxFromJson(api::BoxToJson(b));
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_EQ(record->cpus, 1.5);
  EXPECT_EQ(record->memory_mib, 768u);
  EXPECT_EQ(record->disk_mib, 300u);
  json older = api::BoxToJson(b);  // a server from before the sizes: 0, "not said"
  older.erase("cpus");
  older.erase("memory_mib");
  older.erase("disk_mib");
  auto old_record = api::BoxFromJson(older);
  ASSERT_TRUE(old_record.ok()) << old_record.status().ToString();
  EXPECT_EQ(old_record->memory_mib, 0u);

  const std::vector<FileEntry> entries = {{"a", "/w/a", "file", 1, 0600},
                                          {"b", "/w/b", "dir", 0, 0755}};
  auto listed = api::FileListFromJson(api::FileListToJson(entries), "/w");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[1].path, "/w/b");
  EXPECT_EQ((*listed)[1].mode, 0755u);

  Status st = api::ErrorEventFromJson(api::ErrorToJson(NotFound("no box")).dump());
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.message(), "server: no box");
  auto text = api::TextEventFromJson(api::TextEventToJson("hi").dump(), "stdout");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "hi");
}

TEST(OpenApiTypesTest, TheNewDecodersReadWhatTheEncodersWrite) {
  ExecResult r;
  r.exit_code = 3;
  r.stdout_data = "out";
  r.dropped_stdout = 9;
  auto run =
      api::RunResultFromJson(api::RunResultToJson(r, {.driver = "vm/kvm", .from_pool = true}));
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->result.exit_code, 3);
  EXPECT_EQ(run->result.stdout_data, "out");
  EXPECT_EQ(run->box.driver, "vm/kvm");
  EXPECT_TRUE(run->box.from_pool);
  EXPECT_FALSE(api::RunResultFromJson(api::ExecResultToJson(r)).ok()) << "no box";
  auto process = api::ProcessResultFromJson(api::ProcessResultToJson(42, r));
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  EXPECT_EQ(process->pid, 42);
  EXPECT_EQ(process->result.dropped_stdout, 9u);
  EXPECT_EQ(process->result.dropped_stderr, 0u);

  auto ask = api::AskResultFromJson(api::AskResultToJson(FullAsk()));
  ASSERT_TRUE(ask.ok()) << ask.status().ToString();
  EXPECT_EQ(ask->answer, "5050");
  EXPECT_EQ(ask->mode, "tools");
  EXPECT_EQ(ask->duration, std::chrono::milliseconds(1200));
  ASSERT_EQ(ask->steps.size(), 1u);
  EXPECT_EQ(ask->steps[0].code, FullStep().code);
  EXPECT_EQ(ask->steps[0].thinking, "sum it");
  ASSERT_TRUE(ask->steps[0].result);
  EXPECT_EQ(ask->steps[0].result->text(), "5050");
  auto done = api::AskResultFromJson(api::AskResultToJson(FullAsk(), false));
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_TRUE(done->steps.empty());
  json bad_step = api::AskStepToJson(FullStep());
  bad_step["result"] = "shown";
  EXPECT_EQ(api::AskStepFromJson(bad_step).status().code(), StatusCode::kProtocolError);
  auto code = api::AskCodeFromJson(api::AskCodeToJson({.step = 2, .code = "x = 1"}));
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(code->step, 2);
  EXPECT_EQ(code->code, "x = 1");
  auto answer =
      api::AskAnswerFromJson(api::AskAnswerToJson({"", "step_limit", "8 steps, no answer"}));
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(answer->stop_reason, "step_limit");
  EXPECT_EQ(answer->stop_detail, "8 steps, no answer");

  const api::ServerStatus full = FullStatus();
  auto status = api::ServerStatusFromJson(api::ServerStatusToJson(full));
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(api::ServerStatusToJson(*status), api::ServerStatusToJson(full))
      << "decoding and encoding again gives the same JSON";
  ASSERT_EQ(status->boxes.size(), 1u);
  EXPECT_EQ(status->boxes[0].created_at, ListedBox().created_at);
  EXPECT_EQ(status->pools[0].last_error, "no kvm");
  ASSERT_EQ(status->peers.size(), 1u);
  EXPECT_FALSE(status->peers[0].up);
  EXPECT_EQ(status->peers[0].error, "connection refused");
  EXPECT_DOUBLE_EQ(status->uptime.count(), 12.5);
  auto health = api::HealthFromJson(api::HealthToJson({.boxes = 3, .pools = {kPool}}));
  ASSERT_TRUE(health.ok()) << health.status().ToString();
  EXPECT_EQ(health->boxes, 3u);
  ASSERT_EQ(health->pools.size(), 1u);
  EXPECT_EQ(health->pools[0].taken, 4u);
  json draining = api::HealthToJson({});
  draining["status"] = "draining";
  EXPECT_FALSE(api::HealthFromJson(draining).ok());

  const api::BoxList list{.boxes = {ListedBox()}, .unreachable = {"n2: refused"}};
  auto listed = api::BoxListFromJson(api::BoxListToJson(list));
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(api::BoxListToJson(*listed), api::BoxListToJson(list));
  json box = api::BoxToJson(ListedBox());
  for (const char* time :
       {"2026-12-03 12:00:00", "2026-13-03T12:00:00Z", "2026-12-03T12:00:00+01:00"}) {
    box["created_at"] = time;
    EXPECT_EQ(api::BoxFromJson(box).status().code(), StatusCode::kProtocolError) << time;
  }
  box = api::BoxToJson(ListedBox());
  box["id"] = "b-../../etc";
  EXPECT_EQ(api::BoxFromJson(box).status().code(), StatusCode::kProtocolError);

  api::NodeLoad load;
  load.node = "n1";
  load.boxes = 1;
  load.max_boxes = 2;
  load.cpu_pressure = 50.5;
  load.drivers = {"jail"};
  auto back = api::NodeLoadFromJson(api::NodeLoadToJson(load));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(api::NodeLoadToJson(*back), api::NodeLoadToJson(load));
}

}  // namespace
}  // namespace codebox::testing
