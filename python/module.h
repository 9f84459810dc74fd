// Shared by the parts of the _codebox extension: how a failed Status reaches Python, and the
// conversions of Python arguments into codebox options.
#ifndef CODEBOX_PYTHON_MODULE_H_
#define CODEBOX_PYTHON_MODULE_H_

#include <pybind11/pybind11.h>

#include <chrono>
#include <string>
#include <string_view>

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
// Text from C++ or a box (UTF-8 as far as anyone knows) as a str: bytes that are not UTF-8
// become U+FFFD, so it never fails to decode.
pybind11::str Text(std::string_view s);
// ExecResult::network_events and Execution's: a list of dicts, the box's text decoded with
// replacement.
pybind11::list NetworkEventsToPython(const std::vector<NetworkEvent>& events);

// Seconds (a Python float) as milliseconds; ValueError unless finite and non-negative.
std::chrono::milliseconds Seconds(double seconds, const char* what);

// Options from Python keyword arguments, through the option schema (options_module.cc):
// names and aliases as docs/options.md lists them; an unknown name or a wrong type is a
// TypeError, a bad value a ValueError (codebox.BoxInvalidArgumentError); None is the default
// (for the box's timeouts: no limit). The box options are Validate()d.
BoxOptions BoxOptionsFromDict(const pybind11::dict& kwargs);
ExecOptions ExecOptionsFromDict(const pybind11::dict& kwargs);
// Every box option by its name, in its unit (timeouts in seconds, None for no limit).
pybind11::dict BoxOptionsToDict(const BoxOptions& options);

void BindOptions(pybind11::module_& m);
void BindBox(pybind11::module_& m);
void BindSession(pybind11::module_& m);  // session_module.cc: Box.run_code & co; after BindBox
void BindInterpreter(pybind11::module_& m);
void BindHost(pybind11::module_& m);  // host_module.cc: describe_host  // interpreter_module.cc,
                                      // when codebox_llm exists

}  // namespace codebox::python

#endif  // CODEBOX_PYTHON_MODULE_H_
