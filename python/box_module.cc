// _codebox: the pybind11 extension under the `codebox` Python package. It exposes
// codebox::Box almost verbatim; python/codebox/ builds the CodeBox API on top of it.
//
// Every call that waits on a box releases the GIL, so other Python threads (and the asyncio
// loop, which runs these calls in worker threads) keep going. Errors leave C++ as a
// StatusError and become the exception classes of codebox.errors (RuntimeError subclasses),
// chosen by the Status code.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "codebox/box.h"
#include "codebox/options.h"
#include "codebox/status.h"
#include "module.h"

namespace py = pybind11;

namespace codebox::python {
namespace {

// A Box plus what Python needs around it: a count of calls in flight, so that destroy()
// (from __exit__, possibly while a cancelled exec still runs in a worker thread) ends those
// calls before the Box tears down the connection they use.
class PyBox {
 public:
  explicit PyBox(std::unique_ptr<Box> box) : box_(std::move(box)) {}
  ~PyBox() {
    // The last reference may go away in Python's dealloc, holding the GIL: let it go while
    // the box tears down.
    if (PyGILState_Check()) {
      py::gil_scoped_release release;
      (void)Destroy();
    } else {
      (void)Destroy();
    }
  }

  ExecResult Exec(const std::vector<std::string>& argv, const ExecOptions& options) {
    ThrowIfClosed();
    auto result = box_->Exec(argv, options);
    if (!result.ok()) Throw(result.status());
    return std::move(result).value();
  }

  std::string Run(const std::string& code) {
    ThrowIfClosed();
    auto out = box_->Run(code);
    if (!out.ok()) Throw(out.status());
    return std::move(out).value();
  }

  void CopyIn(const std::string& host_path, const std::string& box_path) {
    ThrowIfClosed();
    if (Status st = box_->CopyIn(host_path, box_path); !st.ok()) Throw(st);
  }

  // max_bytes 0: the box's disk size.
  void CopyOut(const std::string& box_path, const std::string& host_path, uint64_t max_bytes) {
    ThrowIfClosed();
    CopyOutOptions options;
    options.max_bytes = max_bytes;
    if (Status st = box_->CopyOut(box_path, host_path, options); !st.ok()) Throw(st);
  }

  const BoxInfo& info() const { return box_->info(); }

  bool closed() {
    std::lock_guard<std::mutex> lock(mu_);
    return closing_;
  }

  // Idempotent. Box::Destroy ends every process in the box, so calls in flight on other
  // threads return (with "destroyed while this ran"); the Box itself outlives them, since
  // each holds a reference to this object.
  Status Destroy() {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (closing_) {
        cv_.wait(lock, [this] { return destroyed_; });
        return Status::Ok();
      }
      closing_ = true;
    }
    Status st = box_->Destroy();
    {
      std::lock_guard<std::mutex> lock(mu_);
      destroyed_ = true;
    }
    cv_.notify_all();
    return st;
  }

 private:
  // Refuses calls once the box is closing, with the error Python users see.
  void ThrowIfClosed() {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) {
      throw StatusError{"closed", "the box has been closed (its `with` block ended); create a new CodeBox"};
    }
  }

  std::unique_ptr<Box> box_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool closing_ = false;
  bool destroyed_ = false;
};

std::shared_ptr<PyBox> CreateBox(const py::kwargs& kwargs) {
  BoxOptions options = BoxOptionsFromDict(kwargs);
  StatusOr<std::unique_ptr<Box>> box = Status(StatusCode::kInternal, "not started");
  {
    py::gil_scoped_release release;
    box = Box::Create(options);
  }
  if (!box.ok()) Throw(box.status());
  return std::make_shared<PyBox>(std::move(box).value());
}

ExecResult ExecBox(PyBox& box, const std::vector<std::string>& argv, const ExecOptions& options) {
  py::gil_scoped_release release;
  return box.Exec(argv, options);
}

}  // namespace

[[noreturn]] void Throw(const Status& status) {
  throw StatusError{std::string(StatusCodeName(status.code())), status.message()};
}

std::chrono::milliseconds Seconds(double seconds, const char* what) {
  if (std::isnan(seconds) || seconds < 0 || (std::isfinite(seconds) && seconds > 1e9)) {
    throw py::value_error(std::string(what) + " must be a non-negative number of seconds");
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

namespace {

void TranslateStatusError(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const StatusError& e) {
    // codebox.errors maps codes to exception classes; without it, a plain RuntimeError.
    try {
      py::object error =
          py::module_::import("codebox.errors").attr("from_status")(e.code, e.message);
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
    } catch (py::error_already_set&) {
      PyErr_SetString(PyExc_RuntimeError, (e.code + ": " + e.message).c_str());
    }
  }
}

}  // namespace

void BindBox(py::module_& m) {
  py::class_<ExecResult>(m, "ExecResult")
      .def_readonly("exit_code", &ExecResult::exit_code)
      .def_readonly("signal", &ExecResult::signal)
      .def_property_readonly("stdout", [](const ExecResult& r) { return py::bytes(r.stdout_data); })
      .def_property_readonly("stderr", [](const ExecResult& r) { return py::bytes(r.stderr_data); })
      .def_readonly("timed_out", &ExecResult::timed_out)
      .def_readonly("out_of_memory", &ExecResult::out_of_memory)
      .def_readonly("output_truncated", &ExecResult::output_truncated)
      .def_property_readonly("duration", [](const ExecResult& r) { return r.duration.count() / 1000.0; })
      .def_readonly("driver", &ExecResult::driver);

  py::class_<PyBox, std::shared_ptr<PyBox>>(m, "Box")
      .def_static("create", &CreateBox)
      .def("exec", &ExecBox, py::arg("argv"), py::arg("options"))
      .def("run", &PyBox::Run, py::arg("code"), py::call_guard<py::gil_scoped_release>())
      .def("copy_in", &PyBox::CopyIn, py::arg("host_path"), py::arg("box_path"),
           py::call_guard<py::gil_scoped_release>())
      .def("copy_out", &PyBox::CopyOut, py::arg("box_path"), py::arg("host_path"),
           py::arg("max_bytes") = 0, py::call_guard<py::gil_scoped_release>())
      .def("destroy",
           [](PyBox& box) {
             Status st;
             {
               py::gil_scoped_release release;
               st = box.Destroy();
             }
             if (!st.ok()) Throw(st);
           })
      .def_property_readonly("closed", &PyBox::closed)
      .def_property_readonly("info", [](const PyBox& box) {
        const BoxInfo& info = box.info();
        py::dict d;
        d["driver"] = info.driver;
        d["limits"] = info.limits;
        d["limits_not_enforced"] = info.limits_not_enforced;
        return d;
      });
}

}  // namespace codebox::python

PYBIND11_MODULE(_codebox, m) {
  namespace cp = codebox::python;
  m.doc() = "codebox C++ core (use the `codebox` package, not this module)";
  py::register_exception_translator(&cp::TranslateStatusError);
  cp::BindOptions(m);
  cp::BindBox(m);
  cp::BindHost(m);
#ifdef CODEBOX_PYTHON_WITH_LLM
  cp::BindInterpreter(m);
  m.attr("HAS_INTERPRETER") = true;
#else
  m.attr("HAS_INTERPRETER") = false;
#endif
}
