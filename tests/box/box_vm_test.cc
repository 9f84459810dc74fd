// The Box API on the vm driver: the same calls as on the jail, under the guest's own kernel.
// Here (no hardware virtualization) that means QEMU tcg, which is slow: one boot serves all.
#include <sys/utsname.h>

#include <algorithm>
#include <chrono>

#include "base/io.h"
#include "testing/box_test_util.h"
#include "vm/vm.h"

namespace codebox {
namespace {

TEST(BoxVmTest, AutoPrefersTheVmOnlyWithKvm) {
  vm::AcceleratorProbe probe = vm::ProbeAccelerators();
  BoxOptions options = testing::TestBoxOptions();
  options.driver = DriverKind::kAuto;
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  EXPECT_EQ(box->info().driver, probe.kvm_usable ? "vm/kvm" : "jail");
}

TEST(BoxVmTest, VmWithoutKvmOrEmulationIsAClearError) {
  if (vm::ProbeAccelerators().kvm_usable) GTEST_SKIP() << "this host has kvm";
  BoxOptions options = testing::TestBoxOptions();
  options.driver = DriverKind::kVm;
  auto box = Box::Create(options);
  ASSERT_FALSE(box.ok());
  EXPECT_EQ(box.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(box.status().message().find("--allow-emulation"), std::string::npos)
      << box.status().message();
}

TEST(BoxVmTest, RunsPythonUnderItsOwnKernelWithFilesInAndOut) {
  BoxOptions options = testing::TestBoxOptions();
  options.driver = DriverKind::kVm;
  options.allow_emulation = true;
  options.exec_timeout = std::chrono::seconds(60);
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  EXPECT_EQ(box->info().driver.rfind("vm/", 0), 0u) << box->info().driver;

  std::string in = ::testing::TempDir() + "/vm_in.txt";
  ASSERT_TRUE(base::WriteFile(in, "21").ok());
  ASSERT_TRUE(box->CopyIn(in, "/data/in.txt").ok());
  auto r = box->RunPython(
      "import os\n"
      "n = int(open('/data/in.txt').read())\n"
      "open('out.txt', 'w').write(str(n * 2))\n"
      "print(os.uname().release)\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->stderr_data;
  EXPECT_EQ(r->driver, box->info().driver);
  struct utsname host;
  ASSERT_EQ(::uname(&host), 0);
  EXPECT_NE(r->stdout_data, std::string(host.release) + "\n") << "the guest runs the host's kernel?";

  std::string out = ::testing::TempDir() + "/vm_out.txt";
  ASSERT_TRUE(box->CopyOut("out.txt", out).ok());
  EXPECT_EQ(*base::ReadFile(out), "42");

  // The in-memory file calls, over virtio-serial.
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  ASSERT_TRUE(box->WriteFile("mem/all.bin", all).ok());
  auto back = box->ReadFile("mem/all.bin");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, all);
  auto listing = box->ListDir("mem");
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  ASSERT_EQ(listing->size(), 1u);
  EXPECT_EQ((*listing)[0].path, "/work/mem/all.bin");
  EXPECT_EQ((*listing)[0].size, 256u);
  ASSERT_TRUE(box->Remove("mem").ok());
  EXPECT_EQ(box->ReadFile("mem/all.bin").status().code(), StatusCode::kNotFound);

  ExecOptions quick;
  quick.timeout = std::chrono::seconds(2);
  auto slow = box->Exec({"sleep", "30"}, quick);
  ASSERT_TRUE(slow.ok());
  EXPECT_TRUE(slow->timed_out);

  // Its usage is QEMU's, measured on the host: the CPU a busy guest costs grows, its memory
  // holds a guest's at least (a kernel, python), and a destroyed box measures nothing.
  auto before = box->Usage();
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  auto busy = box->Exec({"python3", "-c",
                         "import time\nt = time.time()\nwhile time.time() - t < 1: pass"});
  ASSERT_TRUE(busy.ok()) << busy.status().ToString();
  auto after = box->Usage();
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_GE(after->cpu_time - before->cpu_time, std::chrono::milliseconds(500));
  EXPECT_GE(after->memory_bytes, 32u << 20);
  EXPECT_EQ(after->disk_bytes, 0u);
  ASSERT_TRUE(box->Destroy().ok());
  EXPECT_FALSE(box->Usage().ok()) << "a destroyed box measures nothing";
}

// The guest's own devpts (src/agent/vm_guest.cc mounts it) gives the agent its terminals.
TEST(BoxVmTest, AProgramRunsOnATerminalOfTheGuest) {
  BoxOptions options = testing::TestBoxOptions();
  options.driver = DriverKind::kVm;
  options.allow_emulation = true;
  options.exec_timeout = std::chrono::seconds(60);
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  ExecOptions exec;
  exec.tty = TerminalSize{33, 101};
  exec.stdin_data = "typed\n";
  auto r = box->Exec({"sh", "-c", "tty; stty size; read line; echo got-$line >&2"}, exec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->stdout_data;
  EXPECT_NE(r->stdout_data.find("/dev/pts/"), std::string::npos) << r->stdout_data;
  EXPECT_NE(r->stdout_data.find("33 101\r\n"), std::string::npos) << r->stdout_data;
  EXPECT_NE(r->stdout_data.find("got-typed\r\n"), std::string::npos) << r->stdout_data;
  EXPECT_EQ(r->stderr_data, "");
}

// The guest's own limits (src/agent/guest_limits.h): a fork bomb or a memory hog meets the
// box's limit in the guest's cgroup, as in a jail, and the agent outside it still answers.
TEST(BoxVmTest, AForkBombAndAMemoryHogMeetTheBoxLimitsAndTheAgentStillAnswers) {
  BoxOptions options = testing::TestBoxOptions();
  options.driver = DriverKind::kVm;
  options.allow_emulation = true;
  options.max_processes = 32;
  options.memory_mib = 256;
  options.exec_timeout = std::chrono::seconds(60);
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  const std::vector<std::string>& limits = box->info().limits;
  EXPECT_NE(std::find(limits.begin(), limits.end(), "processes 32 (guest cgroup v2 pids)"),
            limits.end());
  // Programs run in the box's cgroup; the agent (PID 1) is outside it and out of the OOM
  // killer's reach, and its -1000 is not passed on.
  auto where = box->RunPython(
      "print(open('/proc/self/cgroup').read().strip(), "
      "open('/proc/1/oom_score_adj').read().strip(),"
      " open('/proc/self/oom_score_adj').read().strip())");
  ASSERT_TRUE(where.ok()) << where.status().ToString();
  EXPECT_EQ(where->stdout_data, "0::/box -1000 0\n") << where->stderr_data;

  // The program sees the process limit as a jail's sees it: fork fails with EAGAIN.
  auto r = box->RunPython(
      "import os, time\n"
      "pids = []\n"
      "try:\n"
      "    for i in range(200):\n"
      "        pid = os.fork()\n"
      "        if pid == 0:\n"
      "            time.sleep(60); os._exit(0)\n"
      "        pids.append(pid)\n"
      "    print('unbounded')\n"
      "except OSError as e:\n"
      "    print('stopped', len(pids) < 32, e.errno)\n"
      "for p in pids: os.kill(p, 9)\n"
      "for p in pids: os.waitpid(p, 0)\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "stopped True 11\n") << r->stderr_data;

  // A bomb that goes on forking until its timeout: the agent, outside the cgroup, ends it
  // and answers the next exec at once.
  ExecOptions bounded;
  bounded.timeout = std::chrono::seconds(5);
  auto bomb = box->Exec({"python3", "-c",
                         "import os\n"
                         "while True:\n"
                         "    try: os.fork()\n"
                         "    except OSError: pass\n"},
                        bounded);
  ASSERT_TRUE(bomb.ok()) << bomb.status().ToString();
  EXPECT_TRUE(bomb->timed_out);
  auto start = std::chrono::steady_clock::now();
  auto after = box->RunPython("print(1)");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->stdout_data, "1\n") << after->stderr_data;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));

  // More than the programs' share of the 256 MiB: the cgroup's OOM killer ends it.
  ExecOptions hog_options;
  hog_options.timeout = std::chrono::seconds(30);
  auto hog = box->Exec({"python3", "-c",
                        "a = []\n"
                        "while True: a.append(b'x' * (16 << 20))\n"},
                       hog_options);
  ASSERT_TRUE(hog.ok()) << hog.status().ToString();
  EXPECT_TRUE(hog->out_of_memory) << hog->exit_code << " " << hog->signal << " "
                                  << hog->stderr_data;
  EXPECT_FALSE(hog->timed_out);
  auto still = box->RunPython("print(1)");
  ASSERT_TRUE(still.ok()) << still.status().ToString();
  EXPECT_EQ(still->stdout_data, "1\n") << still->stderr_data;
}

}  // namespace
}  // namespace codebox
