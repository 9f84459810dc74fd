// openapi.json against the API's own encoders (src/api), field by field: every field an
// encoder writes is a property of its schema with the right type, and every property of the
// schema is one the encoder writes, and what it writes fits the schema (its required fields
// too). A field added on one side only fails here.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "api/exec_result.h"
#include "api/process_info.h"
#include "tests/server/openapi_check.h"

namespace codebox::testing {
namespace {

using nlohmann::json;

// The names of `schema`'s properties (through allOf).
void Properties(const OpenApiChecker& doc, const json& schema, std::set<std::string>* all) {
  const json& s = doc.Resolve(schema);
  const json parts = s.value("allOf", json::array());
  for (const json& part : parts) Properties(doc, part, all);
  const json properties = s.value("properties", json::object());
  for (const auto& [name, sub] : properties.items()) all->insert(name);
}

// `encoded` (from the API's encoder, with every optional field present) matches `name`.
void ExpectSameFields(const std::string& name, const json& encoded) {
  OpenApiChecker doc;
  std::set<std::string> all;
  Properties(doc, doc.Schema(name), &all);
  std::set<std::string> written;
  for (const auto& [field, value] : encoded.items()) written.insert(field);
  for (const std::string& field : written) {
    EXPECT_TRUE(all.count(field)) << name << ": the encoder writes '" << field
                                  << "', which openapi.json does not document";
  }
  for (const std::string& field : all) {
    EXPECT_TRUE(written.count(field)) << name << ": openapi.json documents '" << field
                                      << "', which the encoder never writes";
  }
  EXPECT_EQ(doc.CheckValue(doc.Schema(name), encoded, name), "");
}

TEST(OpenApiTypesTest, ExecResult) {
  ExecResult r;
  r.exit_code = 0;
  r.stdout_data = std::string("\xff", 1);  // base64
  r.dropped_stdout = 1;
  r.dropped_stderr = 2;
  ExpectSameFields("ExecResult", api::ExecResultToJson(r));
  // Without the optional fields it still fits: every required one is written.
  OpenApiChecker doc;
  EXPECT_EQ(doc.CheckValue(doc.Schema("ExecResult"), api::ExecResultToJson(ExecResult{}), "plain"),
            "");
}

TEST(OpenApiTypesTest, ProcessAndProcessList) {
  ProcessInfo p;
  p.pid = 7;
  p.argv = {"sleep", "1"};
  p.running = false;
  p.exit = ExecResult{};
  ExpectSameFields("Process", api::ProcessInfoToJson(p));
  ExpectSameFields("ProcessList", api::ProcessListToJson({p}));
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
}

}  // namespace
}  // namespace codebox::testing
