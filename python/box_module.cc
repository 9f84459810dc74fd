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
#include "net/egress_policy.h"
#include "py_box.h"
#include "remote/server_choice.h"

namespace py = pybind11;

namespace codebox::python {
namespace {

ExecResult ExecBox(PyBox& box, const std::vector<std::string>& argv, ExecOptions options,
                   py::object on_stdout, py::object on_stderr) {
  options.on_stdout = BytesSink(std::move(on_stdout));
  options.on_stderr = BytesSink(std::move(on_stderr));
  return Blocking(box, [&](Box& b) { return b.Exec(argv, options); });
}

// A process that outlives the call (Box::Start with background): its pid; the handle lets go.
int Spawn(PyBox& box, const std::vector<std::string>& argv, ExecOptions options,
          uint64_t ring_bytes) {
  options.background = true;
  options.ring_bytes = ring_bytes;
  // Its own timeout only (none unless given): the box's exec_timeout is for execs.
  std::unique_ptr<Process> process = Blocking(box, [&](Box& b) { return b.Start(argv, options); });
  process->Detach();
  return process->pid();
}

// Follows a process of the box's table to its end (Box::Attach).
ExecResult Attach(PyBox& box, int pid, py::object on_stdout, py::object on_stderr) {
  ExecOptions options;
  options.on_stdout = BytesSink(std::move(on_stdout));
  options.on_stderr = BytesSink(std::move(on_stderr));
  return Blocking(box, [&](Box& b) -> StatusOr<ExecResult> {
    ASSIGN_OR_RETURN(std::unique_ptr<Process> process, b.Attach(pid, options));
    return process->Wait();
  });
}

// The box's table as dicts (argv is the box's text: str with replacement characters).
py::list Processes(PyBox& box) {
  std::vector<ProcessInfo> listed = Blocking(box, [&](Box& b) { return b.Processes(); });
  py::list out;
  for (const ProcessInfo& p : listed) {
    py::list argv;
    for (const std::string& arg : p.argv) {
      argv.append(Text(arg));
    }
    py::dict d;
    d["pid"] = p.pid;
    d["argv"] = argv;
    d["tty"] = p.tty;
    d["background"] = p.background;
    d["started"] = std::chrono::duration<double>(p.started.time_since_epoch()).count();
    d["running"] = p.running;
    d["exit"] = p.exit ? py::cast(*p.exit) : py::none();
    d["stdout_bytes"] = p.stdout_bytes;
    d["stderr_bytes"] = p.stderr_bytes;
    d["dropped_stdout"] = p.dropped_stdout;
    d["dropped_stderr"] = p.dropped_stderr;
    out.append(d);
  }
  return out;
}

void SendStdin(PyBox& box, int pid, const py::bytes& data, bool close) {
  char* bytes = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(data.ptr(), &bytes, &size) != 0) throw py::error_already_set();
  std::string_view view(bytes, static_cast<size_t>(size));
  Blocking(box, [&](Box& b) { return b.SendStdin(pid, view, close); });
}

void WriteFile(PyBox& box, const std::string& path, const py::bytes& data, uint32_t mode) {
  char* bytes = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(data.ptr(), &bytes, &size) != 0) throw py::error_already_set();
  // `data` is immutable and referenced by the caller until this returns.
  std::string_view view(bytes, static_cast<size_t>(size));
  Blocking(box, [&](Box& b) { return b.WriteFile(path, view, mode); });
}

py::bytes ReadFile(PyBox& box, const std::string& path, uint64_t max_bytes) {
  std::string data = Blocking(box, [&](Box& b) { return b.ReadFile(path, max_bytes); });
  return py::bytes(data);
}

py::list ListDir(PyBox& box, const std::string& path) {
  std::vector<FileEntry> entries = Blocking(box, [&](Box& b) { return b.ListDir(path); });
  py::list out;
  for (const FileEntry& e : entries) {
    // Names are the box's bytes: undecodable ones keep their bytes as surrogates (as os.listdir).
    py::object name = py::reinterpret_steal<py::object>(
        PyUnicode_DecodeFSDefaultAndSize(e.name.data(), static_cast<Py_ssize_t>(e.name.size())));
    py::object full = py::reinterpret_steal<py::object>(
        PyUnicode_DecodeFSDefaultAndSize(e.path.data(), static_cast<Py_ssize_t>(e.path.size())));
    if (!name || !full) throw py::error_already_set();
    out.append(py::make_tuple(name, full, e.type, e.size, e.mode));
  }
  return out;
}

// pip install in the box through its egress proxy (Box::InstallPackages); timeout in seconds.
ExecResult InstallPackages(PyBox& box, const std::vector<std::string>& packages,
                           const std::string& index_url, double timeout) {
  InstallOptions options;
  options.index_url = index_url;
  options.timeout = Seconds(timeout, "timeout");
  return Blocking(box, [&](Box& b) { return b.InstallPackages(packages, options); });
}

// Box::SetNetwork; answers the box's new network description.
std::string SetNetwork(PyBox& box, const std::string& network,
                       const std::vector<std::string>& allow_hosts) {
  auto mode = net::ParseNetworkMode(network);
  if (!mode.ok()) Throw(mode.status().WithContext("network"));
  return Blocking(box, [&](Box& b) -> StatusOr<std::string> {
    RETURN_IF_ERROR(b.SetNetwork(*mode, allow_hosts));
    return b.info().network;
  });
}

// The box's egress records as dicts (host and reason are the box's text: str with
// replacement characters where not UTF-8).
py::list EgressLog(PyBox& box) {
  std::vector<EgressRecord> records;
  {
    Box& b = box.Live();
    py::gil_scoped_release release;
    records = b.EgressLog();
  }
  py::list out;
  for (const EgressRecord& r : records) {
    py::dict d;
    d["host"] = Text(r.host);
    d["port"] = r.port;
    d["allowed"] = r.allowed;
    d["reason"] = Text(r.reason);
    d["address"] = Text(r.address);
    d["bytes_up"] = r.bytes_up;
    d["bytes_down"] = r.bytes_down;
    py::list names;  // the secrets put into the request, by name
    for (const std::string& name : r.secrets) names.append(Text(name));
    d["secrets"] = names;
    out.append(d);
  }
  return out;
}

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

// CodeBox's rule for where its box runs (remote/server_choice.h, shared with the CLI): the
// (server, token) to create it with; server "" is this process.
py::tuple ChooseServer(const std::string& server, const std::string& token, bool local) {
  BoxOptions options;
  options.server = server;
  options.server_token = token;
  Status st;
  {
    py::gil_scoped_release release;  // may ask the default socket's server for /healthz
    st = remote::ChooseServer(&options, local);
  }
  if (!st.ok()) Throw(st);
  return py::make_tuple(options.server, options.server_token);
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

py::str Text(std::string_view s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

py::list NetworkEventsToPython(const std::vector<NetworkEvent>& events) {
  py::list out;
  for (const NetworkEvent& e : events) {
    py::dict d;
    d["host"] = Text(e.host);
    d["port"] = e.port;
    d["rule"] = Text(e.rule);
    d["message"] = Text(e.message);
    d["hint"] = Text(e.hint);
    out.append(d);
  }
  return out;
}

void BindBox(py::module_& m) {
  py::class_<ExecResult>(m, "ExecResult")
      .def_readonly("exit_code", &ExecResult::exit_code)
      .def_readonly("signal", &ExecResult::signal)
      .def_property_readonly("stdout", [](const ExecResult& r) { return py::bytes(r.stdout_data); })
      .def_property_readonly("stderr", [](const ExecResult& r) { return py::bytes(r.stderr_data); })
      .def_readonly("timed_out", &ExecResult::timed_out)
      .def_readonly("out_of_memory", &ExecResult::out_of_memory)
      .def_readonly("output_truncated", &ExecResult::output_truncated)
      .def_property_readonly("duration",
                             [](const ExecResult& r) { return r.duration.count() / 1000.0; })
      .def_readonly("driver", &ExecResult::driver)
      .def_readonly("dropped_stdout", &ExecResult::dropped_stdout)
      .def_readonly("dropped_stderr", &ExecResult::dropped_stderr)
      .def_property_readonly("network_events", [](const ExecResult& r) {
        return NetworkEventsToPython(r.network_events);
      });

  m.def("choose_server", &ChooseServer, py::arg("server"), py::arg("token"), py::arg("local"));

  py::class_<PyBox, std::shared_ptr<PyBox>>(m, "Box")
      .def_static("create", &CreateBox)
      .def("exec", &ExecBox, py::arg("argv"), py::arg("options"), py::arg("on_stdout") = py::none(),
           py::arg("on_stderr") = py::none())
      .def("spawn", &Spawn, py::arg("argv"), py::arg("options"), py::arg("ring_bytes"))
      .def("attach", &Attach, py::arg("pid"), py::arg("on_stdout") = py::none(),
           py::arg("on_stderr") = py::none())
      .def("processes", &Processes)
      .def(
          "signal_process",
          [](PyBox& box, int pid, int sig) {
            Blocking(box, [&](Box& b) { return b.SignalProcess(pid, sig); });
          },
          py::arg("pid"), py::arg("signal"))
      .def(
          "kill_process",
          [](PyBox& box, int pid) { Blocking(box, [&](Box& b) { return b.KillProcess(pid); }); },
          py::arg("pid"))
      .def("send_stdin", &SendStdin, py::arg("pid"), py::arg("data"), py::arg("close"))
      .def(
          "run",
          [](PyBox& box, const std::string& code) {
            return Blocking(box, [&](Box& b) { return b.Run(code); });
          },
          py::arg("code"))
      .def(
          "copy_in",
          [](PyBox& box, const std::string& host_path, const std::string& box_path) {
            Blocking(box, [&](Box& b) { return b.CopyIn(host_path, box_path); });
          },
          py::arg("host_path"), py::arg("box_path"))
      // max_bytes 0: the box's disk size.
      .def(
          "copy_out",
          [](PyBox& box, const std::string& box_path, const std::string& host_path,
             uint64_t max_bytes) {
            CopyOutOptions options;
            options.max_bytes = max_bytes;
            Blocking(box, [&](Box& b) { return b.CopyOut(box_path, host_path, options); });
          },
          py::arg("box_path"), py::arg("host_path"), py::arg("max_bytes") = 0)
      .def("write_file", &WriteFile, py::arg("path"), py::arg("data"), py::arg("mode") = 0644)
      .def("read_file", &ReadFile, py::arg("path"), py::arg("max_bytes") = 0)
      .def("install_packages", &InstallPackages, py::arg("packages"), py::arg("index_url"),
           py::arg("timeout"))
      .def("egress_log", &EgressLog)
      .def("set_network", &SetNetwork, py::arg("network"), py::arg("allow_hosts"))
      .def("list_dir", &ListDir, py::arg("path"))
      .def(
          "remove",
          [](PyBox& box, const std::string& path) {
            Blocking(box, [&](Box& b) { return b.Remove(path); });
          },
          py::arg("path"))
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
        d["network"] = info.network;
        d["user"] = info.user;
        d["start"] = info.start;
        d["warnings"] = info.warnings;
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
  cp::BindSession(m);
  cp::BindHost(m);
#ifdef CODEBOX_PYTHON_WITH_LLM
  cp::BindInterpreter(m);
  m.attr("HAS_INTERPRETER") = true;
#else
  m.attr("HAS_INTERPRETER") = false;
#endif
}
