// A real owner process for lifetime and leftover tests: the `codebox` CLI, started as a child
// with its stdout on a pipe, so a test can wait for it to reach a point and then SIGKILL it.
#ifndef CODEBOX_TESTS_BOX_OWNER_PROCESS_H_
#define CODEBOX_TESTS_BOX_OWNER_PROCESS_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "base/io.h"
#include "base/paths.h"
#include "base/unique_fd.h"

namespace codebox::testing {

inline std::string Codebox() { return base::SelfExeDir() + "/codebox"; }

inline bool Running(int pid) {
  auto stat = base::ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return false;
  size_t close = stat->rfind(')');
  return close != std::string::npos && close + 2 < stat->size() && (*stat)[close + 2] != 'Z' &&
         (*stat)[close + 2] != 'X';
}

inline bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// A running `codebox exec ...`; stdout is a pipe we read "started" from.
struct Owner {
  pid_t pid = -1;
  base::UniqueFd out;
  std::string err_path;
};

inline Owner StartOwner(const std::vector<std::string>& args) {
  Owner o;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return o;
  base::UniqueFd rd(fds[0]), wr(fds[1]);
  o.err_path = ::testing::TempDir() + "/lifetime_owner_" + std::to_string(::getpid()) + ".err";
  base::UniqueFd err(::open(o.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  std::vector<std::string> argv = {Codebox()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(wr.get(), 1);
    ::dup2(err.get(), 2);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  o.pid = pid;
  o.out = std::move(rd);
  return o;
}

// Reads the owner's stdout until `word` shows up; false on EOF (the owner exited) or timeout.
inline bool WaitForOutput(const Owner& o, const std::string& word, std::chrono::seconds timeout) {
  std::string got;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p = {o.out.get(), POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[256];
    ssize_t n = ::read(o.out.get(), buf, sizeof buf);
    if (n <= 0) return false;
    got.append(buf, static_cast<size_t>(n));
    if (got.find(word) != std::string::npos) return true;
  }
  return false;
}

inline std::string OwnerStderr(const Owner& o) {
  auto text = base::ReadFile(o.err_path);
  return text.ok() ? *text : "";
}

}  // namespace codebox::testing

#endif  // CODEBOX_TESTS_BOX_OWNER_PROCESS_H_
