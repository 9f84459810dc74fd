// PyBox: a codebox::Box as the _codebox extension holds it, and the Python callables it hands
// to C++ threads. Shared by box_module.cc (exec, files) and session_module.cc (run_code).
#ifndef CODEBOX_PYTHON_PY_BOX_H_
#define CODEBOX_PYTHON_PY_BOX_H_

#include <pybind11/pybind11.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "codebox/box.h"
#include "module.h"

namespace codebox::python {

// A Box plus what Python needs around it: destroy() (from __exit__, possibly while a cancelled
// call still runs in a worker thread) refuses new calls, and the Box outlives the calls in
// flight, since each holds a reference to this object.
class PyBox {
 public:
  explicit PyBox(std::unique_ptr<Box> box) : box_(std::move(box)) {}
  ~PyBox() {
    // The last reference may go away in Python's dealloc, holding the GIL: let it go while
    // the box tears down.
    if (PyGILState_Check()) {
      pybind11::gil_scoped_release release;
      (void)Destroy();
    } else {
      (void)Destroy();
    }
  }

  // The Box, for a call about to start; a StatusError "closed" once destroy() began.
  Box& Live() {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) {
      throw StatusError{"closed",
                        "the box has been closed (its `with` block ended); create a new CodeBox"};
    }
    return *box_;
  }

  const BoxInfo& info() const { return box_->info(); }

  bool closed() {
    std::lock_guard<std::mutex> lock(mu_);
    return closing_;
  }

  // Idempotent. Box::Destroy ends every process in the box, so calls in flight on other
  // threads return (with "destroyed while this ran").
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
  std::unique_ptr<Box> box_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool closing_ = false;
  bool destroyed_ = false;
};

// Runs `fn(box)` on a live box with the GIL released; a failed Status becomes a StatusError.
template <typename Fn>
auto Blocking(PyBox& py_box, Fn fn) {
  Box& box = py_box.Live();
  pybind11::gil_scoped_release release;
  auto result = fn(box);
  if constexpr (std::is_same_v<decltype(result), Status>) {
    if (!result.ok()) Throw(result);
  } else {
    if (!result.ok()) Throw(result.status());
    return std::move(result).value();
  }
}

// A Python callable that C++ threads may copy and drop without the GIL: the last copy lets go
// of it with the GIL held.
inline std::shared_ptr<pybind11::object> HoldCallable(pybind11::object fn) {
  return std::shared_ptr<pybind11::object>(new pybind11::object(std::move(fn)),
                                           [](pybind11::object* p) {
                                             pybind11::gil_scoped_acquire gil;
                                             delete p;
                                           });
}

// Thrown from a streaming callback to end its exec or cell. The user's own exceptions stay in
// Python (codebox's _Sink keeps them and raises them to the caller); this one says why C++
// was told to stop.
struct CallbackStopped : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Calls `fn(value)` on the C++ thread that delivers each piece, with the GIL held. `fn`
// returns a false value (or raises) to stop the call.
template <typename T>
std::function<void(T)> PythonSink(pybind11::object fn,
                                  std::function<pybind11::object(T)> to_python) {
  if (fn.is_none()) return {};
  auto held = HoldCallable(std::move(fn));
  return [held, to_python](T value) {
    pybind11::gil_scoped_acquire gil;
    std::string why = "the Python callback's sink asked to stop";
    bool go_on = false;
    try {
      go_on = pybind11::bool_((*held)(to_python(value)));
    } catch (pybind11::error_already_set& e) {  // not the user's (the sink keeps those)
      why = std::string("a Python callback raised: ") + e.what();
    }
    if (!go_on) throw CallbackStopped(why);
  };
}

// For byte streams (an exec's or a cell's stdout and stderr): each piece as Python bytes.
inline std::function<void(std::string_view)> BytesSink(pybind11::object fn) {
  return PythonSink<std::string_view>(std::move(fn), [](std::string_view piece) {
    return pybind11::object(pybind11::bytes(piece.data(), piece.size()));
  });
}

}  // namespace codebox::python

#endif  // CODEBOX_PYTHON_PY_BOX_H_
