// The Box API on the vm driver: the same calls as on the jail, under the guest's own kernel.
// Here (no hardware virtualization) that means QEMU tcg, which is slow: one boot serves all.
#include <sys/utsname.h>

#include "base/io.h"
#include "tests/box/box_test_util.h"
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

}  // namespace
}  // namespace codebox
