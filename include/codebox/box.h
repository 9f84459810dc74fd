// Box: one disposable isolated environment that runs untrusted code.
//
//   auto box = codebox::Box::Create({.image = "python"});
//   if (!box.ok()) { /* box.status().message() says why and what to do */ }
//   auto out = (*box)->Run("print(1 + 1)");   // "2\n"
//
// Thread safety: a Box may be used from many threads at once (concurrent execs share it);
// many boxes may exist at once. Destroying the Box (or Destroy()) kills everything in it and
// removes every file, mount and cgroup it made.
#ifndef CODEBOX_BOX_H_
#define CODEBOX_BOX_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox {

// What a box enforces, as reported by its driver: honest about what this host allowed.
struct BoxInfo {
  std::string driver;                    // "jail", "vm/kvm", "vm/tcg"
  std::vector<std::string> limits;       // e.g. "memory 512 MiB (cgroup v1)"
  std::vector<std::string> limits_not_enforced;  // with the reason
};

class Box {
 public:
  static StatusOr<std::unique_ptr<Box>> Create(const BoxOptions& options);
  ~Box();
  Box(const Box&) = delete;
  Box& operator=(const Box&) = delete;

  // Runs argv[0] (looked up in the box's PATH). A non-zero exit is a result, not an error;
  // errors are for a box that cannot answer (crashed, destroyed, protocol failure).
  StatusOr<ExecResult> Exec(const std::vector<std::string>& argv,
                            const ExecOptions& options = {});
  // `python3 -c code`, returning the whole result.
  StatusOr<ExecResult> RunPython(std::string_view code, const ExecOptions& options = {});
  // `python3 -c code`, returning stdout, as CodeBox.run does. A timeout is an error
  // (kDeadlineExceeded); a non-zero exit is not (its stderr is in RunPython's result).
  StatusOr<std::string> Run(std::string_view code);

  // Copies a host file or directory (recursively) to box_path, and back.
  Status CopyIn(const std::string& host_path, const std::string& box_path);
  Status CopyOut(const std::string& box_path, const std::string& host_path);

  const BoxInfo& info() const;
  // Ends the box now; later calls fail with a clear error. The destructor calls it.
  Status Destroy();

  class Impl;

 private:
  explicit Box(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace codebox

#endif  // CODEBOX_BOX_H_
