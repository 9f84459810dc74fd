// Execs as another user (exec's "user") and directories given to one (mkdir's "owner"), with
// the agent on a socketpair as in agent_test.cc. Becoming another user takes root, so most of
// these need it; the refusals run without.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "agent_harness.h"

namespace codebox::testing {
namespace {

using namespace std::chrono_literals;
using protocol::ExecRequest;
using protocol::msg::User;

constexpr uid_t kNobody = 65534;

// 1000, or 1001 for uid 1000 itself: an id that is not `own`.
uint32_t Other(uid_t own) { return own == 1000 ? 1001 : 1000; }

ExecRequest Sh(const std::string& script, std::optional<User> user) {
  ExecRequest r;
  r.exec.argv = {"/bin/sh", "-c", script};
  r.exec.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}};
  r.exec.cwd = "/";
  r.exec.timeout = 10s;
  r.exec.user = user;
  return r;
}

class AgentUserTest : public ::testing::Test {
 protected:
  // The agent as `run_as`, or as the test itself.
  void StartAgent(std::optional<AgentIds> run_as = {}) {
    auto agent = AgentProcess::Start({}, run_as);
    ASSERT_TRUE(agent.ok()) << agent.status().ToString();
    agent_ = std::move(*agent);
    auto client = agent_->Connect();
    ASSERT_TRUE(client.ok()) << client.status().ToString() << "\n" << agent_->StderrText();
    client_ = std::move(*client);
  }
  void SetUp() override {
    char dir[] = "/tmp/codebox-agent-user-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    ::chmod(dir_.c_str(), 0777);  // every user of these tests may write here
  }
  void TearDown() override {
    client_.reset();
    agent_.reset();
    std::filesystem::remove_all(dir_);
  }
  static bool Root() { return ::geteuid() == 0; }

  std::unique_ptr<AgentProcess> agent_;
  std::unique_ptr<protocol::AgentClient> client_;
  std::string dir_;
};

TEST_F(AgentUserTest, AnExecRunsAsItsUserWithNoGroupsAndNoCapabilities) {
  if (!Root()) GTEST_SKIP() << "becoming uid 1000 needs root";
  StartAgent();
  auto r = client_->Exec(
      Sh("id -u; id -g; id -G; grep -E '^(CapEff|CapPrm):' /proc/self/status; touch " + dir_ + "/f",
         User{1000, 1001}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->stderr_data;
  EXPECT_EQ(r->stdout_data,
            "1000\n1001\n1001\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n");
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(st.st_gid, 1001u);
  // Without a user: the agent's own ids, as always.
  auto root = client_->Exec(Sh("id -u; id -g", std::nullopt));
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_EQ(root->stdout_data, "0\n0\n");
}

TEST_F(AgentUserTest, TheUserCannotSwitchBack) {
  if (!Root()) GTEST_SKIP() << "becoming uid 1000 needs root";
  StartAgent();
  // Real, effective and saved ids are all the user's.
  auto r = client_->Exec(Sh("grep -E '^(Uid|Gid):' /proc/self/status", User{1000, 1000}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n");
}

TEST_F(AgentUserTest, ASwitchThatFailsIsAnErrorAndRunsNothing) {
  // As nobody (or as the unprivileged test), the agent can become no one else.
  const bool root = Root();
  StartAgent(root ? std::optional<AgentIds>(AgentIds{kNobody, kNobody}) : std::nullopt);
  const uid_t own_uid = root ? kNobody : ::getuid();
  const gid_t own_gid = root ? kNobody : ::getgid();
  const std::string marker = dir_ + "/ran";
  auto r = client_->Exec(Sh("touch " + marker, User{Other(own_uid), own_gid}));
  ASSERT_FALSE(r.ok()) << "ran, exit code " << r->exit_code;
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied) << r.status().ToString();
  if (root) {
    EXPECT_NE(r.status().message().find("exec: cannot switch to uid 1000: Operation not permitted"),
              std::string::npos)
        << r.status().ToString();
    auto gid = client_->Exec(Sh("touch " + marker, User{kNobody, 1000}));
    ASSERT_FALSE(gid.ok());
    EXPECT_NE(gid.status().message().find("exec: cannot switch to gid 1000"), std::string::npos)
        << gid.status().ToString();
  } else {
    EXPECT_NE(r.status().message().find("exec: cannot "), std::string::npos)
        << r.status().ToString();
  }
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the program ran";
  // The agent serves on; its own ids are still fine to ask for.
  if (root) {
    auto same = client_->Exec(Sh("id -u", User{own_uid, own_gid}));
    ASSERT_TRUE(same.ok()) << same.status().ToString();
    EXPECT_EQ(same->stdout_data, std::to_string(own_uid) + "\n");
  }
  auto plain = client_->Exec(Sh("echo still here", std::nullopt));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->stdout_data, "still here\n");
}

TEST_F(AgentUserTest, TheUnchangedIdIsRefusedBeforeAnythingIsSent) {
  StartAgent();
  auto r = client_->Exec(Sh("true", User{0xffffffffu, 0}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("\"unchanged\""), std::string::npos) << r.status().ToString();
  Status st = client_->MakeDir(dir_ + "/x", 0755, User{0, 0xffffffffu});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/x"));
}

TEST_F(AgentUserTest, MkdirGivesTheDirectoryToItsOwner) {
  if (!Root()) GTEST_SKIP() << "giving a directory to uid 1000 needs root";
  StartAgent();
  const std::string made = dir_ + "/a/b";
  ASSERT_TRUE(client_->MakeDir(made, 0755, User{1000, 1001}).ok());
  struct stat st {};
  ASSERT_EQ(::stat(made.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(st.st_gid, 1001u);
  ASSERT_EQ(::stat((dir_ + "/a").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u) << "the parents made on the way are the owner's too";
  ASSERT_EQ(::stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u) << "a parent that was there stays as it was";
  // write_file's owner: the file and the directories made for it.
  client_->set_file_owner(User{1000, 1001});
  ASSERT_TRUE(client_->WriteFile(dir_ + "/w/x/f.txt", "data", 0640).ok());
  for (const std::string& path : {dir_ + "/w", dir_ + "/w/x", dir_ + "/w/x/f.txt"}) {
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_uid, 1000u) << path;
    EXPECT_EQ(st.st_gid, 1001u) << path;
  }
  EXPECT_EQ(st.st_mode & 07777, 0640u) << "the mode as asked, after the chown";
  client_->set_file_owner(std::nullopt);
  // One already there is given too; without an owner nothing changes.
  ASSERT_TRUE(client_->MakeDir(made, 0755, User{1002, 1002}).ok());
  ASSERT_TRUE(client_->MakeDir(made, 0755).ok());
  ASSERT_EQ(::stat(made.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1002u);
  // A symlink is not followed: what it points at keeps its owner.
  ASSERT_EQ(::symlink(made.c_str(), (dir_ + "/link").c_str()), 0);
  Status st_link = client_->MakeDir(dir_ + "/link", 0755, User{1003, 1003});
  EXPECT_FALSE(st_link.ok());
  ASSERT_EQ(::stat(made.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1002u);
}

TEST_F(AgentUserTest, AnOwnerTheAgentCannotGiveIsAnError) {
  const bool root = Root();
  StartAgent(root ? std::optional<AgentIds>(AgentIds{kNobody, kNobody}) : std::nullopt);
  const uid_t own_uid = root ? kNobody : ::getuid();
  Status st = client_->MakeDir(dir_ + "/given", 0755, User{Other(own_uid), 1000});
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.ToString();
  EXPECT_NE(
      st.message().find("mkdir: give " + std::to_string(Other(own_uid)) + ":1000 the directory"),
      std::string::npos)
      << st.ToString();
}

}  // namespace
}  // namespace codebox::testing
