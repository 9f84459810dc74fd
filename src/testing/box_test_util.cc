#include "testing/box_test_util.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

namespace codebox::testing {

BoxOptions TestBoxOptions() {
  BoxOptions options;
  options.driver = DriverKind::kJail;
  options.exec_timeout = std::chrono::seconds(20);
  return options;
}

namespace {

std::unique_ptr<Box> BoxOrSkipReason(StatusOr<std::unique_ptr<Box>> box, std::string* skip_reason) {
  if (box.ok()) return std::move(*box);
  // Only "this host cannot" is a skip; anything else is a failure of ours. CI sets
  // CODEBOX_TESTS_REQUIRE_BOX=1 after building every image, so there nothing may skip.
  const char* require = std::getenv("CODEBOX_TESTS_REQUIRE_BOX");
  const bool required = require != nullptr && std::string(require) == "1";
  if (!required && (box.status().code() == StatusCode::kNotFound ||
                    box.status().code() == StatusCode::kUnavailable)) {
    *skip_reason = "cannot create a box here: " + box.status().message();
    return nullptr;
  }
  ADD_FAILURE() << "Box::Create: " << box.status().ToString();
  *skip_reason = "box creation failed";
  return nullptr;
}

}  // namespace

std::unique_ptr<Box> MakeBoxOrSkipReason(const BoxOptions& options, std::string* skip_reason) {
  return BoxOrSkipReason(Box::Create(options), skip_reason);
}

std::unique_ptr<Box> MakeBoxOrSkipReason(const BoxOptions& options, box::BoxEnv& env,
                                         std::string* skip_reason) {
  return BoxOrSkipReason(box::CreateBox(options, env), skip_reason);
}

static void ForEachEntry(const std::string& dir,
                         const std::function<void(const std::string&)>& fn) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") fn(name);
  }
  ::closedir(d);
}

namespace {

// /proc/PID/cmdline with its NULs as spaces ("" once the process is gone).
std::string CommandLineOf(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/cmdline");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string cmd = ss.str();
  for (char& c : cmd) {
    if (c == '\0') c = ' ';
  }
  return cmd;
}

}  // namespace

int CountHostProcesses(const std::string& needle) {
  int count = 0;
  std::string self = std::to_string(::getpid());
  ForEachEntry("/proc", [&](const std::string& name) {
    if (name.find_first_not_of("0123456789") != std::string::npos || name == self) return;
    std::string cmd = CommandLineOf(name);
    if (cmd.find(needle) != std::string::npos) ++count;
  });
  return count;
}

int CountOurBoxProcesses() {
  std::map<int, int> parent_of;
  int count = 0;
  const int self = ::getpid();
  const std::string supervisor_of_ours = "--parent " + std::to_string(self);
  ForEachEntry("/proc", [&](const std::string& name) {
    if (name.find_first_not_of("0123456789") != std::string::npos) return;
    std::ifstream stat("/proc/" + name + "/stat");
    std::string line;
    std::getline(stat, line);
    size_t close = line.rfind(')');
    if (close == std::string::npos) return;
    std::istringstream rest(line.substr(close + 2));
    char state;
    int ppid = 0;
    rest >> state >> ppid;
    parent_of[std::stoi(name)] = ppid;
    std::string cmd = CommandLineOf(name);
    if (cmd.find(supervisor_of_ours) != std::string::npos) ++count;
  });
  for (const auto& [pid, ppid] : parent_of) {
    int p = ppid;
    for (int depth = 0; p > 1 && depth < 64; ++depth) {
      if (p == self) {
        ++count;
        break;
      }
      auto it = parent_of.find(p);
      if (it == parent_of.end()) break;
      p = it->second;
    }
  }
  return count;
}

static int CountEntriesWhere(const std::string& dir,
                             const std::function<bool(const std::string&)>& match) {
  int count = 0;
  ForEachEntry(dir, [&](const std::string& name) { count += match(name) ? 1 : 0; });
  return count;
}

int CountDirEntries(const std::string& dir, const std::string& prefix) {
  return CountEntriesWhere(dir, [&](const std::string& name) { return name.starts_with(prefix); });
}

int CountDirEntriesContaining(const std::string& dir, const std::string& needle) {
  return CountEntriesWhere(
      dir, [&](const std::string& name) { return name.find(needle) != std::string::npos; });
}

int CountOpenFds() { return CountDirEntries("/proc/self/fd"); }

std::string OurJailIdPrefix() { return std::to_string(::getpid()) + "-"; }

int CountOurCgroups() { return CountCgroupsOf(::getpid()); }

int CountSupervisorsOf(int owner_pid) {
  return CountHostProcesses("--parent " + std::to_string(owner_pid) + " ");
}

int CountCgroupsOf(int owner_pid) {
  const std::string ours = "codebox-" + std::to_string(owner_pid) + "-";
  int count = 0;
  std::function<void(const std::string&, int)> walk = [&](const std::string& dir, int depth) {
    if (depth > 3) return;
    ForEachEntry(dir, [&](const std::string& name) {
      std::string path = dir + "/" + name;
      DIR* d = ::opendir(path.c_str());
      if (d == nullptr) return;
      ::closedir(d);
      if (name.rfind(ours, 0) == 0) ++count;
      walk(path, depth + 1);
    });
  };
  walk("/sys/fs/cgroup", 0);
  return count;
}

}  // namespace codebox::testing
