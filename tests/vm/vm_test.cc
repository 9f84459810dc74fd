// Integration tests of the vm driver: real QEMU microvm boots of the Debian cloud kernel with
// codebox-agent as /init and the `python` image as its disk. Under tcg each boot costs
// seconds, so one machine (booted once, shared) serves the checks that leave it healthy and
// only the destructive checks boot their own.
#include "vm/vm.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/utsname.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "base/io.h"
#include "base/paths.h"
#include "image/store.h"
#include "agent_client/agent_client.h"
#include "vm/accel.h"
#include "vm/kernel.h"

namespace codebox::vm {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kHandshake{10'000};

// What a boot needs, or why this host cannot boot one (the skip message says the fix).
struct Env {
  VmConfig config;
  std::string skip;
};

const Env& TestEnv() {
  static const Env env = [] {
    Env e;
    e.config.home = base::CodeboxHome("");
    e.config.allow_emulation = true;  // CI hosts here have no usable kvm; tcg is a real VM
    // These test the machine as it boots; restores are tests/box/box_vm_snapshot_test.cc's.
    e.config.snapshot = false;
    AcceleratorProbe probe = ProbeAccelerators();
    if (!probe.kvm_usable && !probe.tcg_usable) {
      e.skip = "no accelerator: " + probe.tcg_reason;
      return e;
    }
    e.config.agent_path = base::FindHelperBinary("codebox-agent");
    if (e.config.agent_path.empty()) {
      e.skip = "codebox-agent not built (run: ninja codebox-agent)";
      return e;
    }
    auto image = image::FindImage(e.config.home, "python");
    if (!image.ok()) {
      e.skip = "image 'python' missing in " + e.config.home +
               " (run: codebox image build python): " + image.status().message();
      return e;
    }
    e.config.image_tree = image->rootfs;
    auto kernel = EnsureKernel(e.config.home);
    if (!kernel.ok()) {
      e.skip = "guest kernel unavailable (run: apt-get update; apt-get download " +
               std::string(kKernelMetaPackage) + " must work): " + kernel.status().message();
    }
    return e;
  }();
  return env;
}

#define SKIP_UNLESS_BOOTABLE()                                   \
  do {                                                           \
    if (!TestEnv().skip.empty()) GTEST_SKIP() << TestEnv().skip; \
  } while (0)

struct Booted {
  std::unique_ptr<Machine> machine;
  std::unique_ptr<protocol::AgentClient> client;
};

StatusOr<Booted> Boot(VmConfig config) {
  Booted b;
  ASSIGN_OR_RETURN(b.machine, Machine::Start(config));
  ASSIGN_OR_RETURN(b.client, protocol::AgentClient::Connect(b.machine->TakeAgentFd(), kHandshake));
  return b;
}

StatusOr<ExecResult> Exec(protocol::AgentClient& client, std::vector<std::string> argv,
                          milliseconds timeout = milliseconds(60'000)) {
  protocol::ExecRequest req;
  req.exec.argv = std::move(argv);
  req.exec.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", "/root"}, {"LANG", "C.UTF-8"}};
  req.exec.cwd = "/work";
  req.exec.timeout = timeout;
  return client.Exec(req);
}

// One machine for every check that leaves it healthy.
class SharedVm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!TestEnv().skip.empty()) return;
    auto b = Boot(TestEnv().config);
    if (!b.ok()) {
      boot_error_ = new std::string(b.status().ToString());
      return;
    }
    booted_ = new Booted(std::move(*b));
  }
  static void TearDownTestSuite() {
    delete booted_;
    booted_ = nullptr;
  }
  void SetUp() override {
    SKIP_UNLESS_BOOTABLE();
    ASSERT_EQ(boot_error_, nullptr) << *boot_error_;
    ASSERT_NE(booted_, nullptr);
  }
  protocol::AgentClient& client() { return *booted_->client; }
  Machine& machine() { return *booted_->machine; }

  static Booted* booted_;
  static std::string* boot_error_;
};
Booted* SharedVm::booted_ = nullptr;
std::string* SharedVm::boot_error_ = nullptr;

TEST_F(SharedVm, ExecRunsInTheGuest) {
  auto r = Exec(client(), {"sh", "-c", "echo hello; echo oops >&2; exit 3"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->stdout_data, "hello\n");
  EXPECT_EQ(r->stderr_data, "oops\n");
  EXPECT_EQ(machine().driver_name().rfind("vm/", 0), 0u);
  EXPECT_EQ(machine().limits().at(0), "memory 512 MiB (guest RAM)");
}

TEST_F(SharedVm, RunsPythonFromTheImage) {
  auto r = Exec(client(), {"python3", "-c",
                           "import sys, json; print(json.dumps([sys.version_info[0], 6*7]))"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->stderr_data;
  EXPECT_EQ(r->stdout_data, "[3, 42]\n");
}

TEST_F(SharedVm, GuestHasItsOwnKernel) {
  auto kernel = FindCachedKernel(TestEnv().config.home);
  ASSERT_TRUE(kernel.ok());
  auto r = Exec(client(), {"sh", "-c", "uname -r; cat /proc/cmdline"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  struct utsname host;
  ::uname(&host);
  EXPECT_EQ(r->stdout_data.substr(0, r->stdout_data.find('\n')), kernel->release);
  EXPECT_EQ(r->stdout_data.find(host.release), std::string::npos) << "host kernel visible";
  EXPECT_NE(r->stdout_data.find("codebox.disk=256M"), std::string::npos) << r->stdout_data;
}

TEST_F(SharedVm, OnlyLoopbackNetwork) {
  auto r = Exec(client(), {"sh", "-c", "ls /sys/class/net; cat /sys/class/net/lo/operstate"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data.substr(0, 3), "lo\n") << r->stdout_data;
  auto py = Exec(client(), {"python3", "-c",
                            "import socket; s=socket.socket(); s.settimeout(3)\n"
                            "try:\n s.connect(('10.0.2.2', 80)); print('connected')\n"
                            "except OSError as e: print('no network', e.errno)"});
  ASSERT_TRUE(py.ok()) << py.status().ToString();
  EXPECT_EQ(py->stdout_data.rfind("no network", 0), 0u) << py->stdout_data;
}

TEST_F(SharedVm, HostEnvironmentIsAbsent) {
  // main() set CODEBOX_VM_TEST_SECRET before the boot: neither QEMU nor the guest may see it.
  auto r = Exec(client(), {"sh", "-c", "env; cat /proc/1/environ | tr '\\0' '\\n'"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data.find("CODEBOX_HOME"), std::string::npos);
  EXPECT_EQ(r->stdout_data.find("CODEBOX_VM_TEST_SECRET"), std::string::npos);
  auto environ = base::ReadFile("/proc/" + std::to_string(machine().qemu_pid()) + "/environ");
  ASSERT_TRUE(environ.ok());
  EXPECT_EQ(environ->find("CODEBOX_VM_TEST_SECRET"), std::string::npos);
  EXPECT_NE(environ->find("PATH="), std::string::npos);
}

TEST_F(SharedVm, CopiesFilesInAndOut) {
  std::string blob;
  for (int i = 0; i < 300'000; ++i) blob += static_cast<char>((i * 7919) & 0xff);
  ASSERT_TRUE(client().WriteFile("/work/in.bin", blob).ok());
  auto r = Exec(client(),
                {"python3", "-c",
                 "d=open('/work/in.bin','rb').read(); open('/work/out.bin','wb').write(d[::-1]);"
                 "print(len(d))"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "300000\n") << r->stderr_data;
  auto out = client().ReadFile("/work/out.bin");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, std::string(blob.rbegin(), blob.rend()));

  std::string host_in = "/tmp/vm_test_in_" + std::to_string(::getpid());
  std::string host_out = host_in + ".back";
  ASSERT_TRUE(base::WriteFile(host_in, std::string(3 << 20, 'z')).ok());
  ASSERT_TRUE(client().WriteFileFromHost(host_in, "/work/big.txt").ok());
  {
    base::UniqueFd out(::open(host_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    ASSERT_TRUE(out.valid());
    ASSERT_TRUE(client()
                    .ReadFileStream(
                        "/work/big.txt", 4 << 20, [](uint64_t, uint32_t) { return Status::Ok(); },
                        [&out](std::string_view chunk) { return base::WriteAll(out.get(), chunk); })
                    .ok());
  }
  auto back = base::ReadFile(host_out);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->size(), size_t{3} << 20);
  ::unlink(host_in.c_str());
  ::unlink(host_out.c_str());
}

TEST_F(SharedVm, ImageIsReadOnlyUnderAWritableSizeLimitedOverlay) {
  auto r =
      Exec(client(),
           {"sh", "-c",
            "echo x > /usr/bin/new-file && cat /usr/bin/new-file; "
            "grep -E ' / | /mnt/ro ' /proc/mounts | cut -d' ' -f3 | sort | tr '\\n' ' '; echo; "
            "dd if=/dev/zero of=/work/fill bs=1M count=400 2>&1 | grep -o 'No space left on "
            "device'; rm -f /work/fill"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data.substr(0, 2), "x\n");
  EXPECT_NE(r->stdout_data.find("No space left on device"), std::string::npos) << r->stdout_data;
}

TEST_F(SharedVm, ExecTimeoutKillsAndGuestClockKeepsTime) {
  auto start = Clock::now();
  auto r = Exec(client(), {"sh", "-c", "sleep 30"}, milliseconds(1500));
  auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->timed_out);
  // A wrong tsc_early_khz would stretch or shrink guest time; 1.5 s must look like 1.5 s.
  EXPECT_GE(took.count(), 1300);
  EXPECT_LT(took.count(), 6000);
  auto after = Exec(client(), {"true"});
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->exit_code, 0);
}

TEST_F(SharedVm, MemoryBombIsOutOfMemory) {
  auto r = Exec(client(), {"python3", "-c", "a = []\nwhile True: a.append(b'x' * (32 << 20))"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->out_of_memory) << "exit " << r->exit_code << " signal " << r->signal << "\n"
                                << r->stderr_data << machine().ConsoleTail();
  EXPECT_FALSE(r->ok());
  auto after = Exec(client(), {"python3", "-c", "print('still here')"});
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->stdout_data, "still here\n");
}

// Destructive checks: each boots its own machine.

TEST(VmCrash, GuestKernelPanicIsBoxCrashedWithConsoleLines) {
  SKIP_UNLESS_BOOTABLE();
  auto b = Boot(TestEnv().config);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto r = Exec(*b->client, {"sh", "-c", "echo c > /proc/sysrq-trigger; sleep 10"});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().code() == StatusCode::kBoxCrashed ||
              r.status().code() == StatusCode::kProtocolError)
      << r.status().ToString();
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (b->machine->Alive() && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_FALSE(b->machine->Alive());
  std::string console = b->machine->ConsoleTail(40);
  EXPECT_NE(console.find("Kernel panic"), std::string::npos) << console;
  EXPECT_TRUE(b->machine->Destroy().ok());
  EXPECT_NE(b->machine->ConsoleTail(40).find("Kernel panic"), std::string::npos);
}

TEST(VmCrash, QemuKilledFromOutsideFailsPendingExec) {
  SKIP_UNLESS_BOOTABLE();
  auto b = Boot(TestEnv().config);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  int pid = b->machine->qemu_pid();
  std::thread killer([pid] {
    std::this_thread::sleep_for(milliseconds(500));
    ::kill(pid, SIGKILL);
  });
  auto r = Exec(*b->client, {"sleep", "30"});
  killer.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kBoxCrashed) << r.status().ToString();
  // QEMU's sockets close before it becomes a zombie that waitpid can see: allow a moment.
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (b->machine->Alive() && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_FALSE(b->machine->Alive());
  EXPECT_FALSE(b->client->connection_status().ok());
}

TEST(VmLifecycle, DestroyEndsQemuWithinOneSecondAndIsIdempotent) {
  SKIP_UNLESS_BOOTABLE();
  VmConfig config = TestEnv().config;
  config.memory_mib = 256;
  config.disk_mib = 64;
  auto b = Boot(config);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->machine->limits().at(0), "memory 256 MiB (guest RAM)");
  auto mem = Exec(*b->client, {"sh", "-c", "grep MemTotal /proc/meminfo; df -m /work | tail -1"});
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  // MemTotal is RAM less the kernel's own reservations: a bit under 256 MiB.
  long kib = std::atol(mem->stdout_data.substr(mem->stdout_data.find(':') + 1).c_str());
  EXPECT_GT(kib, 180 * 1024) << mem->stdout_data;
  EXPECT_LE(kib, 256 * 1024) << mem->stdout_data;
  EXPECT_NE(mem->stdout_data.find(" 64 "), std::string::npos) << mem->stdout_data;
  int pid = b->machine->qemu_pid();
  auto start = Clock::now();
  EXPECT_TRUE(b->machine->Destroy().ok());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  EXPECT_NE(::kill(pid, 0), 0) << "qemu still running";
  EXPECT_FALSE(b->machine->Alive());
  EXPECT_TRUE(b->machine->Destroy().ok());
}

TEST(VmLifecycle, NotReadyInTimeIsStartFailedAndLeavesNothingRunning) {
  SKIP_UNLESS_BOOTABLE();
  VmConfig config = TestEnv().config;
  config.start_timeout = milliseconds(300);
  auto start = Clock::now();
  auto m = Machine::Start(config);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kStartFailed);
  EXPECT_NE(m.status().message().find("not ready within 300 ms"), std::string::npos)
      << m.status().message();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST(VmAccel, KvmBootsWhenTheHostHasIt) {
  AcceleratorProbe probe = ProbeAccelerators();
  if (!probe.kvm_usable) GTEST_SKIP() << "kvm not usable here: " << probe.kvm_reason;
  SKIP_UNLESS_BOOTABLE();
  VmConfig config = TestEnv().config;
  config.allow_emulation = false;
  auto b = Boot(config);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->machine->driver_name(), "vm/kvm");
}

TEST(VmAccel, WithoutKvmAndWithoutEmulationIsUnavailable) {
  AcceleratorProbe probe = ProbeAccelerators();
  if (probe.kvm_usable) GTEST_SKIP() << "this host has kvm";
  VmConfig config = TestEnv().config;
  config.allow_emulation = false;
  auto m = Machine::Start(config);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(m.status().message().find("--allow-emulation"), std::string::npos);
}

}  // namespace
}  // namespace codebox::vm

int main(int argc, char** argv) {
  // A stand-in for the caller's secrets: QEMU and the guest must never see it.
  ::setenv("CODEBOX_VM_TEST_SECRET", "sk-not-for-the-box", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
