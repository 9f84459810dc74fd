// _codebox.Interpreter: codebox::llm::Interpreter for the codebox.Interpreter Python class.
// ask() releases the GIL for the whole conversation; the progress callbacks take it back
// while they run (they are called on the thread that called ask()).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "llm/interpreter.h"
#include "module.h"

namespace py = pybind11;

namespace codebox::python {
namespace {

class PyInterpreter {
 public:
  // llm: base_url, api_key, model, mode, max_steps, stream, request_timeout, max_retries,
  // system_prompt, tool_output_cap, input_files, output_dir. box: BoxOptionsFromDict's keys.
  // Callbacks may be None.
  PyInterpreter(const py::dict& llm, const py::dict& box, py::object on_text, py::object on_code,
                py::object on_result, py::object on_notice, py::object on_thinking)
      : on_text_(std::move(on_text)),
        on_code_(std::move(on_code)),
        on_result_(std::move(on_result)),
        on_notice_(std::move(on_notice)),
        on_thinking_(std::move(on_thinking)) {
    llm::InterpreterOptions o;
    for (const auto& [key_obj, value] : llm) {
      const std::string key = py::cast<std::string>(key_obj);
      if (value.is_none()) continue;
      if (key == "base_url") {
        o.base_url = value.cast<std::string>();
      } else if (key == "api_key") {
        o.api_key = value.cast<std::string>();
      } else if (key == "model") {
        o.model = value.cast<std::string>();
      } else if (key == "mode") {
        auto mode = llm::ParseMode(value.cast<std::string>());
        if (!mode.ok()) Throw(mode.status());
        o.mode = *mode;
      } else if (key == "max_steps") {
        o.max_steps = value.cast<int>();
        if (o.max_steps < 1) throw py::value_error("max_steps must be at least 1");
      } else if (key == "stream") {
        o.stream = value.cast<bool>();
      } else if (key == "request_timeout") {
        o.request_timeout = Seconds(value.cast<double>(), "request_timeout");
      } else if (key == "max_retries") {
        o.max_retries = value.cast<int>();
      } else if (key == "system_prompt") {
        o.system_prompt = value.cast<std::string>();
      } else if (key == "tool_output_cap") {
        o.tool_output_cap = value.cast<size_t>();
      } else if (key == "input_files") {
        o.input_files = value.cast<std::vector<std::string>>();
      } else if (key == "output_dir") {
        o.output_dir = value.cast<std::string>();
      } else {
        throw py::type_error("unknown interpreter option '" + key + "'");
      }
    }
    o.box = BoxOptionsFromDict(box);
    if (!on_text_.is_none()) {
      o.on_text = [this](std::string_view text) { Call(on_text_, text); };
    }
    if (!on_code_.is_none()) {
      o.on_code = [this](int step, const std::string& code) {
        Call(on_code_, step, std::string_view(code));
      };
    }
    if (!on_result_.is_none()) {
      // The step as the transcript's JSON has it; the Python side parses it.
      o.on_result = [this](const llm::Step& step) {
        Call(on_result_, step.index, std::string_view(llm::StepToJson(step)));
      };
    }
    if (!on_notice_.is_none()) {
      o.on_notice = [this](std::string_view text) { Call(on_notice_, text); };
    }
    if (!on_thinking_.is_none()) {
      o.on_thinking = [this](std::string_view text) { Call(on_thinking_, text); };
    }
    interpreter_ = std::make_unique<llm::Interpreter>(std::move(o));
  }

  // The transcript as JSON text. On an error, StatusError; partial_json() has what happened.
  std::string Ask(const std::string& task) {
    StatusOr<llm::Transcript> transcript = Status(StatusCode::kInternal, "not asked");
    callback_error_.reset();
    {
      py::gil_scoped_release release;
      transcript = interpreter_->Ask(task);
    }
    if (callback_error_) {
      // The first exception a callback raised; the conversation ran to its end regardless.
      auto error = std::move(callback_error_);
      callback_error_.reset();
      error->restore();
      throw py::error_already_set();
    }
    if (!transcript.ok()) Throw(transcript.status());
    return transcript->ToJson();
  }

  std::string PartialJson() const { return interpreter_->partial().ToJson(); }

 private:
  void Call(const py::object& fn, std::string_view text) {
    py::gil_scoped_acquire gil;
    if (callback_error_) return;  // after one failure, stay quiet
    try {
      fn(Text(text));
    } catch (py::error_already_set& e) {
      callback_error_ = std::make_unique<py::error_already_set>(std::move(e));
    }
  }

  // (step, text): the code before a cell runs, the step's JSON after.
  void Call(const py::object& fn, int step, std::string_view code) {
    py::gil_scoped_acquire gil;
    if (callback_error_) return;
    try {
      fn(step, Text(code));
    } catch (py::error_already_set& e) {
      callback_error_ = std::make_unique<py::error_already_set>(std::move(e));
    }
  }

  py::object on_text_, on_code_, on_result_, on_notice_, on_thinking_;
  std::unique_ptr<py::error_already_set> callback_error_;
  std::unique_ptr<llm::Interpreter> interpreter_;
};

}  // namespace

void BindInterpreter(py::module_& m) {
  py::class_<PyInterpreter>(m, "Interpreter")
      .def(py::init<const py::dict&, const py::dict&, py::object, py::object, py::object,
                    py::object, py::object>(),
           py::arg("llm"), py::arg("box"), py::arg("on_text") = py::none(),
           py::arg("on_code") = py::none(), py::arg("on_result") = py::none(),
           py::arg("on_notice") = py::none(), py::arg("on_thinking") = py::none())
      .def("ask", &PyInterpreter::Ask, py::arg("task"))
      .def("partial_json", &PyInterpreter::PartialJson);
}

}  // namespace codebox::python
