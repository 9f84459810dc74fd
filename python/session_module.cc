// Box.run_code / restart_kernel / interrupt_code: the code-interpreter session of a box
// (codebox::Box::RunCode) for codebox's CodeBox.run_code. An Execution and each CellResult
// reach Python as plain dicts and lists, which python/codebox/_execution.py turns into
// Execution / Result objects.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <optional>
#include <string>

#include "codebox/box.h"
#include "codebox/execution.h"
#include "module.h"
#include "py_box.h"

namespace py = pybind11;

namespace codebox::python {
namespace {

py::list TextList(const std::vector<std::string>& pieces) {
  py::list out;
  for (const std::string& p : pieces) out.append(Text(p));
  return out;
}

py::dict ResultToPython(const CellResult& r) {
  py::dict data;
  for (const auto& [mime, value] : r.data) data[Text(mime)] = Text(value);
  py::dict out;
  out["data"] = data;
  out["is_main_result"] = r.is_main_result;
  return out;
}

py::dict ExecutionToPython(const Execution& e) {
  py::dict out;
  out["stdout"] = TextList(e.stdout_chunks);
  out["stderr"] = TextList(e.stderr_chunks);
  py::list results;
  for (const CellResult& r : e.results) results.append(ResultToPython(r));
  out["results"] = results;
  if (e.error) {
    py::dict error;
    error["name"] = Text(e.error->name);
    error["value"] = Text(e.error->value);
    error["traceback"] = Text(e.error->traceback);
    out["error"] = error;
  } else {
    out["error"] = py::none();
  }
  out["execution_count"] = e.execution_count;
  out["duration"] = e.duration.count() / 1000.0;
  out["timed_out"] = e.timed_out;
  out["kernel_restarted"] = e.kernel_restarted;
  out["out_of_memory"] = e.out_of_memory;
  out["output_truncated"] = e.output_truncated;
  out["driver"] = e.driver;
  out["network_events"] = NetworkEventsToPython(e.network_events);
  return out;
}

// timeout: None for the box's exec timeout, math.inf for none, else seconds (checked by
// codebox: at least 0.001).
py::dict RunCode(PyBox& box, const std::string& code, std::optional<double> timeout,
                 py::object on_stdout, py::object on_stderr, py::object on_result) {
  RunCodeOptions options;
  if (timeout) {
    options.timeout =
        std::isinf(*timeout) && *timeout > 0 ? kNoTimeout : Seconds(*timeout, "run_code timeout");
  }
  options.on_stdout = BytesSink(std::move(on_stdout));
  options.on_stderr = BytesSink(std::move(on_stderr));
  options.on_result = PythonSink<const CellResult&>(
      std::move(on_result), [](const CellResult& r) { return py::object(ResultToPython(r)); });
  Execution e = Blocking(box, [&](Box& b) { return b.RunCode(code, options); });
  return ExecutionToPython(e);
}

}  // namespace

void BindSession(py::module_& m) {
  py::object cls = m.attr("Box");
  auto method = [&cls](const char* name, py::cpp_function fn) { py::setattr(cls, name, fn); };
  method("run_code",
         py::cpp_function(&RunCode, py::name("run_code"), py::is_method(cls), py::arg("code"),
                          py::arg("timeout") = py::none(), py::arg("on_stdout") = py::none(),
                          py::arg("on_stderr") = py::none(), py::arg("on_result") = py::none()));
  method(
      "restart_kernel",
      py::cpp_function([](PyBox& box) { Blocking(box, [](Box& b) { return b.RestartKernel(); }); },
                       py::name("restart_kernel"), py::is_method(cls)));
  method(
      "interrupt_code",
      py::cpp_function([](PyBox& box) { Blocking(box, [](Box& b) { return b.InterruptCode(); }); },
                       py::name("interrupt_code"), py::is_method(cls)));
}

}  // namespace codebox::python
