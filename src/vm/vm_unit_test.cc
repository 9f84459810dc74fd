// Unit tests of the vm driver's pieces that need no VM: cpio, modules, QEMU argv, console
// excerpts, accelerator choice.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "base/fs.h"
#include "base/io.h"
#include "base/paths.h"
#include "base/subprocess.h"
#include "vm/accel.h"
#include "vm/cpio.h"
#include "vm/guest_limits.h"
#include "vm/kernel.h"
#include "vm/modules.h"
#include "vm/qemu.h"

namespace codebox::vm {
namespace {

std::string TempDir() {
  auto dir = base::MakeTempDir("/tmp", "vm_unit_");
  EXPECT_TRUE(dir.ok());
  return *dir;
}

TEST(Cpio, SystemCpioListsAndExtractsWhatWeWrote) {
  if (base::FindProgram("cpio").empty()) GTEST_SKIP() << "cpio missing (apt-get install cpio)";
  CpioWriter w;
  w.AddDirectory("dir");
  w.AddFile("dir/a.txt", "hello", 0640);
  w.AddFile("odd", std::string("x\0y", 3), 0755);
  w.AddCharDevice("console", 5, 1);
  std::string dir = TempDir();
  ASSERT_TRUE(base::WriteFile(dir + "/a.cpio", w.Finish()).ok());
  base::Command list({"sh", "-c", "cpio -it --quiet < a.cpio"});
  list.cwd = dir;
  auto listed = base::RunChecked(list);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->out, "dir\ndir/a.txt\nodd\nconsole\n");
  base::Command extract({"sh", "-c", "mkdir x && cd x && cpio -id --quiet < ../a.cpio"});
  extract.cwd = dir;
  ASSERT_TRUE(base::RunChecked(extract).ok());
  EXPECT_EQ(*base::ReadFile(dir + "/x/dir/a.txt"), "hello");
  EXPECT_EQ(*base::ReadFile(dir + "/x/odd"), std::string("x\0y", 3));
  EXPECT_TRUE(base::RemoveTree(dir).ok());
}

TEST(Modules, ResolvesDependenciesFirstFromTheCachedKernel) {
  auto kernel = FindCachedKernel(base::CodeboxHome(""));
  if (!kernel.ok()) GTEST_SKIP() << "no cached guest kernel (run a vm box once, or vm_test)";
  auto mods = ResolveModules(kernel->modules_dir, GuestModules());
  ASSERT_TRUE(mods.ok()) << mods.status().ToString();
  std::vector<std::string> names;
  for (const auto& m : *mods) names.push_back(m.name);
  auto pos = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) - names.begin();
  };
  ASSERT_LT(pos("virtio_blk"), static_cast<long>(names.size()));
  EXPECT_LT(pos("virtio_ring"), pos("virtio"));  // virtio depends on virtio_ring
  EXPECT_LT(pos("virtio"), pos("virtio_mmio"));
  EXPECT_LT(pos("libcrc32c"), pos("erofs"));
  for (const auto& m : *mods) EXPECT_EQ(m.data.substr(1, 3), "ELF") << m.name;
}

TEST(Modules, ModinfoOfNonElfIsAnError) {
  EXPECT_FALSE(ModinfoField("not an elf", "depends").ok());
  EXPECT_FALSE(ModinfoField(std::string(64, '\0'), "depends").ok());
}

TEST(Qemu, ArgvHasNoNetworkASandboxAndAReadOnlyDisk) {
  QemuLaunch l;
  l.qemu = "/usr/bin/qemu-system-x86_64";
  l.kernel = "/k";
  l.initramfs = "/i";
  l.disk = "/d.erofs";
  l.console_log = "/c.log";
  l.tsc_khz = 2500000;
  std::string joined;
  for (const auto& a : QemuArgv(l)) joined += a + " ";
  EXPECT_NE(joined.find("-nodefaults"), std::string::npos);
  EXPECT_NE(joined.find("-nic none"), std::string::npos);
  EXPECT_NE(joined.find("-sandbox on"), std::string::npos);
  EXPECT_NE(joined.find("readonly=on"), std::string::npos);
  EXPECT_NE(joined.find("accel=tcg"), std::string::npos);
  EXPECT_NE(joined.find("tsc_early_khz=2500000"), std::string::npos);
  EXPECT_NE(joined.find("codebox.disk=256M"), std::string::npos);
  EXPECT_EQ(joined.find("netdev"), std::string::npos);
  l.accel = Accelerator::kKvm;
  EXPECT_EQ(GuestCommandLine(l).find("tsc_early_khz"), std::string::npos);
}

TEST(Accel, WithoutEmulationTheErrorSaysWhatToDo) {
  AcceleratorProbe probe = ProbeAccelerators();
  auto accel = ChooseAccelerator(/*allow_emulation=*/false);
  if (probe.kvm_usable) {
    EXPECT_TRUE(accel.ok());
    return;
  }
  ASSERT_FALSE(accel.ok());
  EXPECT_EQ(accel.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(accel.status().message().find("--allow-emulation"), std::string::npos);
  EXPECT_NE(accel.status().message().find("/dev/kvm"), std::string::npos);
  EXPECT_FALSE(probe.kvm_reason.empty());
}

// Every way /dev/kvm can be, from the facts a probe gathers: the verdict, and words that say
// what is wrong and what to do (not "no hardware virtualization" when only access is missing).
TEST(Accel, EachKvmStateSaysWhatIsWrong) {
  KvmFacts works{.cpu_virtualization = true};
  AcceleratorProbe ok = JudgeAccelerators(works, /*qemu_found=*/true);
  EXPECT_TRUE(ok.kvm_usable);
  EXPECT_EQ(ok.kvm_state, KvmState::kUsable);
  EXPECT_TRUE(ok.tcg_usable);
  EXPECT_EQ(KvmUnavailableReason(ok), "");

  AcceleratorProbe missing = JudgeAccelerators({.open_errno = ENOENT}, true);
  EXPECT_EQ(missing.kvm_state, KvmState::kMissing);
  EXPECT_EQ(KvmUnavailableReason(missing),
            "no hardware virtualization on this host (/dev/kvm is missing)");

  AcceleratorProbe denied =
      JudgeAccelerators({.open_errno = EACCES, .group = "kvm", .cpu_virtualization = true}, true);
  EXPECT_FALSE(denied.kvm_usable);
  EXPECT_EQ(denied.kvm_state, KvmState::kNoAccess);
  EXPECT_EQ(KvmUnavailableReason(denied),
            "/dev/kvm: Permission denied; add yourself to group kvm: sudo usermod -aG kvm $USER, "
            "then log in again");
  EXPECT_TRUE(denied.tcg_usable);
  // The node's group is the one to join; a root-only node needs an admin first.
  AcceleratorProbe other_group = JudgeAccelerators({.open_errno = EACCES, .group = "hyper"}, true);
  EXPECT_NE(other_group.kvm_reason.find("sudo usermod -aG hyper $USER"), std::string::npos);
  AcceleratorProbe root_only = JudgeAccelerators({.open_errno = EPERM, .group = "root"}, true);
  EXPECT_EQ(root_only.kvm_state, KvmState::kNoAccess);
  EXPECT_EQ(root_only.kvm_reason.rfind("/dev/kvm: Operation not permitted; it belongs to group "
                                       "root: an admin makes it group kvm",
                                       0),
            0u)
      << root_only.kvm_reason;

  AcceleratorProbe pvm = JudgeAccelerators({.cpu_virtualization = false}, true);
  EXPECT_EQ(pvm.kvm_state, KvmState::kNoHardware);
  EXPECT_EQ(KvmUnavailableReason(pvm).rfind("no hardware virtualization on this host (/dev/kvm "
                                            "is present but the CPU has no vmx/svm flag",
                                            0),
            0u);

  AcceleratorProbe refused =
      JudgeAccelerators({.cpu_virtualization = true, .create_vm_errno = ENOMEM}, true);
  EXPECT_EQ(refused.kvm_state, KvmState::kBroken);
  EXPECT_EQ(KvmUnavailableReason(refused),
            "kvm is not usable here (/dev/kvm refuses KVM_CREATE_VM: Cannot allocate memory)");
  AcceleratorProbe old_api =
      JudgeAccelerators({.cpu_virtualization = true, .api_version = 11}, true);
  EXPECT_EQ(old_api.kvm_reason, "/dev/kvm answers KVM_GET_API_VERSION with 11");

  // Without QEMU neither accelerator runs, and both say why.
  AcceleratorProbe no_qemu = JudgeAccelerators(works, /*qemu_found=*/false);
  EXPECT_FALSE(no_qemu.kvm_usable);
  EXPECT_FALSE(no_qemu.tcg_usable);
  EXPECT_NE(no_qemu.kvm_reason.find("qemu-system-x86_64 not found"), std::string::npos);
}

TEST(Accel, ReadKvmFactsStopsAtTheFirstMissingStep) {
  KvmFacts none = ReadKvmFacts("/nonexistent/kvm");
  EXPECT_EQ(none.open_errno, ENOENT);
  EXPECT_EQ(none.group, "");
  EXPECT_EQ(JudgeAccelerators(none, true).kvm_state, KvmState::kMissing);
  // A node that is not kvm opens but must not pass as kvm: /dev/null answers no KVM ioctl.
  KvmFacts null = ReadKvmFacts("/dev/null");
  EXPECT_EQ(null.open_errno, 0);
  EXPECT_EQ(null.group, "root");
  EXPECT_FALSE(JudgeAccelerators(null, true).kvm_usable);
}

TEST(Qemu, ConsoleExcerptKeepsThePanicLine) {
  std::string console = "boot\r\nKernel panic - not syncing: sysrq\ntrace 1\ntrace 2\ntrace 3\n";
  EXPECT_EQ(ConsoleExcerpt(console, 2), "Kernel panic - not syncing: sysrq\n...\ntrace 2\ntrace 3");
  EXPECT_EQ(ConsoleExcerpt(console, 4),
            "Kernel panic - not syncing: sysrq\ntrace 1\ntrace 2\ntrace 3");
  EXPECT_EQ(ConsoleExcerpt("a\r\nb\n", 5), "a\nb");
}

TEST(GuestLimits, ProgramsGetTheRamLessAReserveAndHalfOfASmallGuest) {
  EXPECT_EQ(GuestExecMemoryBytes(512), 432ull << 20);   // 512 - (64 + 16)
  EXPECT_EQ(GuestExecMemoryBytes(1024), 928ull << 20);  // 1024 - (64 + 32)
  EXPECT_EQ(GuestExecMemoryBytes(128), 64ull << 20);    // the vm driver's least: half
  // More RAM never means less for the programs.
  for (uint64_t mib = 128; mib < 8192; mib += 8) {
    EXPECT_LE(GuestExecMemoryBytes(mib), GuestExecMemoryBytes(mib + 8)) << mib;
    EXPECT_LT(GuestExecMemoryBytes(mib), mib << 20) << mib;
  }
}

TEST(GuestLimits, LinesNameTheProgramsMemoryAndTheProcessLimit) {
  VmConfig config;
  config.memory_mib = 512;
  config.max_processes = 128;
  EXPECT_EQ(GuestLimitLines(config),
            (std::vector<std::string>{
                "programs' memory 432 MiB of the guest RAM (guest cgroup v2, no swap)",
                "processes 128 (guest cgroup v2 pids)"}));
  config.max_processes = 0;
  EXPECT_EQ(GuestLimitLines(config).size(), 1u);
}

}  // namespace
}  // namespace codebox::vm
