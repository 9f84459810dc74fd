#include "jail/control.h"

#include <gtest/gtest.h>

namespace codebox::jail {
namespace {

using namespace std::chrono_literals;

SupervisorConfig FullConfig() {
  SupervisorConfig c;
  c.jail.rootfs = "/var/lib/codebox/images/abc/rootfs";
  c.jail.agent_path = "/usr/lib/codebox/codebox-agent";
  c.jail.workdir = "/work=dir";  // '=' in a value: only the first one splits
  c.jail.hostname = "box";
  c.jail.memory_bytes = 768ull << 20;
  c.jail.disk_bytes = 5ull << 30;
  c.jail.max_processes = 64;
  c.jail.max_open_files = 4096;
  c.jail.cpus = 1.5;
  c.id = "123-456-7-abcdef";
  c.staging_dir = "/run/codebox-jail/123-456-7-abcdef";
  c.cgroup_version = 1;
  c.cgroup_dirs = {"memory:/sys/fs/cgroup/memory/codebox-x", "!:cpu: not mounted"};
  return c;
}

TEST(ControlConfig, RoundTrips) {
  SupervisorConfig c = FullConfig();
  auto back = DecodeConfig(EncodeConfig(c));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->jail.rootfs, c.jail.rootfs);
  EXPECT_EQ(back->jail.agent_path, c.jail.agent_path);
  EXPECT_EQ(back->jail.workdir, "/work=dir");
  EXPECT_EQ(back->jail.hostname, "box");
  EXPECT_EQ(back->jail.memory_bytes, 768ull << 20);
  EXPECT_EQ(back->jail.disk_bytes, 5ull << 30);
  EXPECT_EQ(back->jail.max_processes, 64u);
  EXPECT_EQ(back->jail.max_open_files, 4096u);
  EXPECT_DOUBLE_EQ(back->jail.cpus, 1.5);
  EXPECT_EQ(back->id, c.id);
  EXPECT_EQ(back->staging_dir, c.staging_dir);
  EXPECT_EQ(back->cgroup_version, 1);
  EXPECT_EQ(back->cgroup_dirs, c.cgroup_dirs);
  EXPECT_EQ(back->jail.user, std::nullopt) << "no user: root only";
  c.jail.user = BoxUser{1000, 0xfffffffe};
  auto with_user = DecodeConfig(EncodeConfig(c));
  ASSERT_TRUE(with_user.ok()) << with_user.status().ToString();
  EXPECT_EQ(with_user->jail.user, (BoxUser{1000, 0xfffffffe}));
}

TEST(ControlConfig, CpusTravelInMillicpusRounded) {
  SupervisorConfig c = FullConfig();
  c.jail.cpus = 0.2345;
  auto back = DecodeConfig(EncodeConfig(c));
  ASSERT_TRUE(back.ok());
  EXPECT_DOUBLE_EQ(back->jail.cpus, 0.235);
  EXPECT_NE(EncodeConfig(c).find("millicpus=235\n"), std::string::npos);
}

TEST(ControlConfig, RefusesWhatItCannotRead) {
  const std::string good = EncodeConfig(FullConfig());
  auto unknown = DecodeConfig(good + "colour=7\n");
  EXPECT_EQ(unknown.status().code(), StatusCode::kProtocolError);
  EXPECT_NE(unknown.status().message().find("unknown key 'colour'"), std::string::npos);
  for (const char* bad :
       {"memory=lots\n", "memory=\n", "memory=-1\n", "memory=+5\n", "memory= 5\n", "nproc=1e3\n",
        "memory=99999999999999999999999\n", "no-equals-sign\n", "user=1000\n", "user=1000:\n",
        "user=:1000\n", "user=-1:0\n", "user=1000:4294967295\n", "user=4294967296:0\n",
        "user=1:2:3\n", "user=app\n"}) {
    auto st = DecodeConfig(good + bad);
    EXPECT_EQ(st.status().code(), StatusCode::kProtocolError) << bad;
  }
  auto missing = DecodeConfig("rootfs=/r\nagent=/a\n");
  EXPECT_EQ(missing.status().code(), StatusCode::kProtocolError);
  EXPECT_NE(missing.status().message().find("required"), std::string::npos);
}

TEST(ControlReady, RoundTripsSuccess) {
  ReadyMessage r;
  r.ok = true;
  r.box_pid = 4242;
  r.limits = {"memory 512 MiB (cgroup v2, no swap)", "open files 1024"};
  r.limits_not_enforced = {"cpu: no controller"};
  auto back = DecodeReady(EncodeReady(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->ok);
  EXPECT_EQ(back->box_pid, 4242);
  EXPECT_EQ(back->limits, r.limits);
  EXPECT_EQ(back->limits_not_enforced, r.limits_not_enforced);
}

TEST(ControlReady, RoundTripsFailureWithoutTheRest) {
  ReadyMessage r;
  r.ok = false;
  r.error = "mount image /usr: EACCES";
  r.box_pid = 7;
  auto back = DecodeReady(EncodeReady(r));
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->ok);
  EXPECT_EQ(back->error, "mount image /usr: EACCES");
  EXPECT_EQ(back->box_pid, 0) << "a failed start names no box pid";
}

TEST(ControlReady, RefusesMalformedAnswers) {
  EXPECT_EQ(DecodeReady("").status().code(), StatusCode::kProtocolError);
  EXPECT_EQ(DecodeReady("pid=5\nlimit=x\n").status().code(), StatusCode::kProtocolError);
  auto bad_pid = DecodeReady("ok=1\npid=12ab\n");
  EXPECT_EQ(bad_pid.status().code(), StatusCode::kProtocolError);
  EXPECT_NE(bad_pid.status().message().find("bad pid '12ab'"), std::string::npos);
}

TEST(ControlPackets, KeepMessageBoundaries) {
  auto pair = SeqPacketPair();
  ASSERT_TRUE(pair.ok()) << pair.status().ToString();
  auto& [a, b] = *pair;
  ASSERT_TRUE(SendPacket(a.get(), "first").ok());
  ASSERT_TRUE(SendPacket(a.get(), std::string(1000, 'x')).ok());
  auto one = RecvPacket(b.get(), 1000ms);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, "first");
  auto two = RecvPacket(b.get(), 1000ms);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, std::string(1000, 'x'));
}

TEST(ControlPackets, TimeoutAndCloseAreTold) {
  auto pair = SeqPacketPair();
  ASSERT_TRUE(pair.ok());
  auto& [a, b] = *pair;
  auto start = std::chrono::steady_clock::now();
  auto quiet = RecvPacket(b.get(), 100ms);
  EXPECT_EQ(quiet.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 90ms);
  a.reset();
  auto closed = RecvPacket(b.get(), 1000ms);
  EXPECT_EQ(closed.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(closed.status().message(), "closed");
  EXPECT_FALSE(SendPacket(b.get(), "to nobody").ok()) << "no SIGPIPE, an error";
}

}  // namespace
}  // namespace codebox::jail
