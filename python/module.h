// Shared by the parts of the _codebox extension: how a failed Status reaches Python, and the
// conversions of Python arguments into codebox options.
#ifndef CODEBOX_PYTHON_MODULE_H_
#define CODEBOX_PYTHON_MODULE_H_

#include <pybind11/pybind11.h>

#include <chrono>
#include <string>

#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::python {

// A failed Status on its way to Python; `code` is StatusCodeName() or "closed". The
// extension's exception translator turns it into codebox.errors.from_status(code, message).
struct StatusError {
  std::string code;
  std::string message;
};

[[noreturn]] void Throw(const Status& status);

// Seconds (a Python float) as milliseconds; ValueError unless finite and non-negative.
std::chrono::milliseconds Seconds(double seconds, const char* what);
// A timeout from Python: None or math.inf -> kNoTimeout; else seconds, at least 0.001
// (ValueError below: it would round to 0, which must never read as "no limit").
std::chrono::milliseconds TimeoutSeconds(const pybind11::handle& value, const char* what);

// BoxOptions from the keyword arguments of CodeBox (image, driver, memory_mib, cpus, timeout,
// env, allow_emulation, disk_mib, workdir, max_processes, output_limit_bytes, box_timeout,
// home); a missing key keeps the C++ default, an unknown one is a TypeError.
BoxOptions BoxOptionsFromDict(const pybind11::dict& kwargs);

void BindBox(pybind11::module_& m);
void BindInterpreter(pybind11::module_& m);
void BindHost(pybind11::module_& m);  // host_module.cc: describe_host  // interpreter_module.cc, when codebox_llm exists

}  // namespace codebox::python

#endif  // CODEBOX_PYTHON_MODULE_H_
