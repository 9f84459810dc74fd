// The fixture of box_seam_test: a FakeEnv and BoxOptions whose workdir is a fresh temporary
// directory (the in-process agent works on the host's file system).
#ifndef CODEBOX_TESTS_BOX_SEAM_FIXTURE_H_
#define CODEBOX_TESTS_BOX_SEAM_FIXTURE_H_

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "fake_backend.h"

namespace codebox::testing {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

inline ExecOptions WithTimeout(std::chrono::milliseconds timeout) {
  ExecOptions o;
  o.timeout = timeout;
  return o;
}
inline ExecOptions WithStdin(std::string data) {
  ExecOptions o;
  o.stdin_data = std::move(data);
  return o;
}
inline ExecOptions WithEnv(const std::string& name, const std::string& value) {
  ExecOptions o;
  o.env[name] = value;
  return o;
}

class SeamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/codebox-seam-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    tmp_ = dir;
    options_.workdir = tmp_ + "/work";
    options_.exec_timeout = 30s;
  }
  void TearDown() override { std::filesystem::remove_all(tmp_); }

  std::unique_ptr<Box> Create() {
    auto box = box::CreateBox(options_, env_);
    if (!box.ok()) {
      ADD_FAILURE() << box.status().ToString();
      return nullptr;
    }
    return std::move(*box);
  }
  FakeBoxState& state() { return *env_.state; }
  bool AgentAlive() { return ::kill(env_.state->agent_pid, 0) == 0; }

  static double Seconds(Clock::time_point since) {
    return std::chrono::duration<double>(Clock::now() - since).count();
  }

  std::string tmp_;
  BoxOptions options_;
  FakeEnv env_;
};

}  // namespace codebox::testing

#endif  // CODEBOX_TESTS_BOX_SEAM_FIXTURE_H_
