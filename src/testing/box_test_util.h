// Shared by the Box-level integration tests: a fixture that makes a jail box, or skips with
// the reason when this host cannot (no image built, no driver).
#ifndef CODEBOX_TESTING_BOX_TEST_UTIL_H_
#define CODEBOX_TESTING_BOX_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "box/local_box.h"
#include "codebox/box.h"

namespace codebox::testing {

// Options every box test starts from: the jail driver, short timeouts.
BoxOptions TestBoxOptions();

// Creates a box or returns nullptr after GTEST_SKIP-worthy reason in *skip_reason.
std::unique_ptr<Box> MakeBoxOrSkipReason(const BoxOptions& options, std::string* skip_reason);
// The same through `env` (box::CreateBox).
std::unique_ptr<Box> MakeBoxOrSkipReason(const BoxOptions& options, box::BoxEnv& env,
                                         std::string* skip_reason);

// Host processes whose command line contains `needle` (excluding this process).
int CountHostProcesses(const std::string& needle);
// Processes that belong to this process's boxes: its descendants, and jail supervisors that
// name it as their parent (other programs' boxes on the machine are not counted).
int CountOurBoxProcesses();
// Entries in a directory (0 if it does not exist) whose name starts with `prefix`.
int CountDirEntries(const std::string& dir, const std::string& prefix = "");
// Entries in a directory (0 if it does not exist) whose name contains `needle`.
int CountDirEntriesContaining(const std::string& dir, const std::string& needle);
// Open fds of this process.
int CountOpenFds();
// Jail ids start with the pid of the process that made them: "<pid>-".
std::string OurJailIdPrefix();
// Cgroup directories of this process's jails ("codebox-<pid>-...") in every hierarchy.
int CountOurCgroups();
// Cgroup directories of the jails of process `owner_pid` (which may be dead), and its jail
// supervisors still running ("--parent <pid>" on their command line): for a killed server.
int CountCgroupsOf(int owner_pid);
int CountSupervisorsOf(int owner_pid);

}  // namespace codebox::testing

// CODEBOX_MAKE_BOX_OR_SKIP(box, options) or (box, options, env).
#define CODEBOX_MAKE_BOX_OR_SKIP(var, ...)                                      \
  std::string var##_skip;                                                       \
  auto var = ::codebox::testing::MakeBoxOrSkipReason(__VA_ARGS__, &var##_skip); \
  if (!var) GTEST_SKIP() << var##_skip

#endif  // CODEBOX_TESTING_BOX_TEST_UTIL_H_
