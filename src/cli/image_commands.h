// The parts of `codebox image` (image_command.cc: build, ls, rm; image_pull_command.cc: pull,
// import) and what they share.
#ifndef CODEBOX_CLI_IMAGE_COMMANDS_H_
#define CODEBOX_CLI_IMAGE_COMMANDS_H_

#include <signal.h>

#include <string>
#include <vector>

namespace codebox::cli {

extern const char kImageUsage[];

int ImagePull(const std::vector<std::string>& args);
int ImageImport(const std::vector<std::string>& args);

// While it lives, Ctrl-C does not kill this process: it reaches the whole process group, so
// the tool at work (debootstrap, apt-get, skopeo) dies of it and the command returns an
// error after removing its temp dir. Catching it (instead of dying at once) is what lets that
// cleanup run. interrupted() says whether it came.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  static bool interrupted();

 private:
  struct sigaction old_ {};
};

}  // namespace codebox::cli

#endif  // CODEBOX_CLI_IMAGE_COMMANDS_H_
