#include "api/run_result.h"

#include <string>

#include "api/exec_result.h"
#include "base/json_fields.h"
#include "base/text.h"

namespace codebox::api {

using nlohmann::json;

json OneShotBoxToJson(const OneShotBox& box) {
  return {{"driver", box.driver}, {"from_pool", box.from_pool}};
}

StatusOr<OneShotBox> OneShotBoxFromJson(const json& j, std::string_view what) {
  if (!j.is_object()) {
    return ProtocolError(std::string(what) + " is a JSON " + j.type_name() + ", not an object");
  }
  base::JsonFields f(j, std::string(what));
  OneShotBox box;
  ASSIGN_OR_RETURN(std::string driver, f.String("driver"));
  box.driver = base::TerminalSafe(driver, 64);
  ASSIGN_OR_RETURN(box.from_pool, f.Bool("from_pool"));
  return box;
}

json RunResultToJson(const ExecResult& result, const OneShotBox& box) {
  json j = ExecResultToJson(result);
  j["box"] = OneShotBoxToJson(box);
  return j;
}

StatusOr<RunResult> RunResultFromJson(const json& j) {
  RunResult run;
  ASSIGN_OR_RETURN(run.result, ExecResultFromJson(j));
  base::JsonFields f(j, "the run result");
  const json* box = f.Find("box");
  if (box == nullptr) return f.Missing("box");
  ASSIGN_OR_RETURN(run.box, OneShotBoxFromJson(*box, "the run result's box"));
  return run;
}

}  // namespace codebox::api
