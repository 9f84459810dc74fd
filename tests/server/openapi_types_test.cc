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

#include "api/box_record.h"
#include "api/egress_record.h"
#include "api/error.h"
#include "api/exec_result.h"
#include "api/execution.h"
#include "api/file_entry.h"
#include "api/files_query.h"
#include "api/process_info.h"
#include "api/requests.h"
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
// against `schema`, recursively: names both ways, required = always written, types.
void Compare(const OpenApiChecker& doc, const json& schema, const json& full, const json& minimal,
             const std::string& where) {
  ASSERT_TRUE(full.is_object()) << where;
  ASSERT_TRUE(minimal.is_object()) << where;
  std::map<std::string, json> props;
  std::set<std::string> required;
  Collect(doc, schema, &props, &required);
  for (const auto& [field, value] : full.items()) {
    EXPECT_TRUE(props.count(field))
        << where << ": the encoder writes '" << field << "', which openapi.json does not document";
  }
  for (const auto& [field, sub] : props) {
    EXPECT_TRUE(full.contains(field))
        << where << ": openapi.json documents '" << field << "', which the encoder never writes";
    EXPECT_TRUE(Typed(doc, sub)) << where << "." << field << ": no JSON type in openapi.json";
  }
  for (const auto& [field, value] : minimal.items()) {
    EXPECT_TRUE(required.count(field)) << where << ": the encoder always writes '" << field
                                       << "', which openapi.json does not require";
  }
  for (const std::string& field : required) {
    EXPECT_TRUE(minimal.contains(field))
        << where << ": openapi.json requires '" << field << "', which the encoder may leave out";
  }
  EXPECT_EQ(doc.CheckValue(schema, full, where), "");
  EXPECT_EQ(doc.CheckValue(schema, minimal, where + " (minimal)"), "");
  // Into nested objects and lists of objects: the minimal side where it has one, else the full
  // one (then only names and types are compared).
  for (const auto& [field, value] : full.items()) {
    if (!props.count(field)) continue;
    const json& sub = props[field];
    const json& low = minimal.contains(field) ? minimal[field] : value;
    if (value.is_object()) {
      if (const json* o = ObjectSchema(doc, sub)) {
        Compare(doc, *o, value, low.is_object() ? low : value, where + "." + field);
      }
    } else if (value.is_array() && !value.empty() && value[0].is_object()) {
      const json& s = doc.Resolve(sub);
      ASSERT_TRUE(s.contains("items")) << where << "." << field;
      const json* o = ObjectSchema(doc, s["items"]);
      ASSERT_NE(o, nullptr) << where << "." << field << ": a list of objects without properties";
      const json& low_item = low.is_array() && !low.empty() ? low[0] : value[0];
      Compare(doc, *o, value[0], low_item, where + "." + field + "[0]");
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

}  // namespace
}  // namespace codebox::testing
