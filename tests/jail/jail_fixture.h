// Shared setup of the jail tests: the built `python` image, the built agent, a started jail
// and a connected client.
#ifndef CODEBOX_TESTS_JAIL_JAIL_FIXTURE_H_
#define CODEBOX_TESTS_JAIL_JAIL_FIXTURE_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "base/paths.h"
#include "image/store.h"
#include "jail/jail.h"
#include "mini_client.h"

namespace codebox::jail::testing {

// The image rootfs, or "" with *why set.
inline std::string PythonRootfs(std::string* why) {
  auto image = image::FindImage(base::CodeboxHome(), "python");
  if (!image.ok()) {
    *why = "image python not built; run: codebox image build python (" + image.status().message() +
           ")";
    return "";
  }
  return image->rootfs;
}

// Beside the test binary, or $CODEBOX_AGENT (the sanitizer build points it at the static
// release agent: a box has no sanitizer runtime).
inline std::string AgentPath() { return base::FindHelperBinary("codebox-agent"); }

class JailTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    rootfs_ = PythonRootfs(&why);
    if (rootfs_.empty()) GTEST_SKIP() << why;
    if (::access(AgentPath().c_str(), X_OK) != 0)
      GTEST_SKIP() << "agent not built: " << AgentPath();
  }

  JailConfig Config() const {
    JailConfig c;
    c.rootfs = rootfs_;
    c.agent_path = AgentPath();
    return c;
  }

  // Starts a jail and says hello; fails the test on error.
  void StartBox(const JailConfig& config) {
    auto jail = Jail::Start(config);
    ASSERT_TRUE(jail.ok()) << jail.status().ToString();
    jail_ = std::move(*jail);
    client_ = std::make_unique<MiniClient>(jail_->TakeAgentFd());
    Status hello = client_->Hello();
    ASSERT_TRUE(hello.ok()) << hello.ToString();
  }

  MiniResult Sh(const std::string& script, int timeout_ms = 20000) {
    auto r = client_->Sh(script, timeout_ms);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : MiniResult{};
  }

  MiniResult Python(const std::string& code, int timeout_ms = 20000) {
    auto r = client_->Exec({"/usr/bin/python3", "-c", code}, timeout_ms);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : MiniResult{};
  }

  std::string rootfs_;
  std::unique_ptr<Jail> jail_;
  std::unique_ptr<MiniClient> client_;
};

}  // namespace codebox::jail::testing

#endif  // CODEBOX_TESTS_JAIL_JAIL_FIXTURE_H_
