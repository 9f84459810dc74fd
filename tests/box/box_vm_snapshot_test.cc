// vm boxes restored from a template (src/vm/snapshot.h), under tcg here: each clone unique,
// the template never written, memory shared, a damaged template a boot with a warning.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "base/fs.h"
#include "base/io.h"
#include "base/unique_fd.h"
#include "box/spares.h"
#include "testing/box_test_util.h"
#include "vm/cache_key.h"
#include "vm/snapshot.h"

namespace codebox {
namespace {

// Every test gets templates of its own (ctest runs each in its own process).
class VmSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = "/dev/shm/codebox-templates-test-" + std::to_string(::getpid());
    ::setenv("CODEBOX_TEMPLATE_DIR", root_.c_str(), 1);
  }
  void TearDown() override {
    (void)base::RemoveTree(root_);
    ::unsetenv("CODEBOX_TEMPLATE_DIR");
  }
  static BoxOptions VmOptions() {
    BoxOptions options = testing::TestBoxOptions();
    options.driver = DriverKind::kVm;
    options.allow_emulation = true;
    options.exec_timeout = std::chrono::seconds(60);
    return options;
  }
  std::string root_;
};

double Now() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// "Pss:" and "Rss:" of a process, in KiB.
std::pair<uint64_t, uint64_t> PssAndRss(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  uint64_t pss = 0, rss = 0;
  for (std::string line; std::getline(in, line);) {  // the first line names the range
    std::istringstream words(line);
    std::string key;
    uint64_t value = 0;
    if (!(words >> key >> value)) continue;
    if (key == "Pss:") pss = value;
    if (key == "Rss:") rss = value;
  }
  return {pss, rss};
}

// Pids of the QEMUs mapping `memory_file` privately (the clones of that template).
std::vector<int> ClonePids(const std::string& memory_file) {
  std::vector<int> pids;
  for (const std::string& name : base::ListDirectory("/proc")) {
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    auto cmdline = base::ReadFile("/proc/" + name + "/cmdline");
    // argv[0] is QEMU's (its keeper has the same words after its own).
    if (cmdline.ok() && cmdline->substr(0, cmdline->find('\0')).find("qemu-system") != std::string::npos &&
        cmdline->find("mem-path=" + memory_file + ",share=off") != std::string::npos) {
      pids.push_back(std::stoi(name));
    }
  }
  return pids;
}

TEST_F(VmSnapshotTest, ClonesAreUniqueTheirClocksAreTheHostsAndTheTemplateNeverChanges) {
  CODEBOX_MAKE_BOX_OR_SKIP(first, VmOptions());
  // The first box made the template, and is itself a clone of it.
  EXPECT_EQ(first->info().start.rfind("snapshot ", 0), 0u) << first->info().start;
  EXPECT_TRUE(first->info().warnings.empty());
  std::vector<vm::TemplateInfo> templates = vm::ListTemplates();
  ASSERT_EQ(templates.size(), 1u);
  const vm::TemplateInfo& made = templates[0];
  ASSERT_TRUE(vm::VerifyTemplate(made).ok());

  // Six clones at once: each its own RNG, boot_id and machine-id, and the host's time.
  constexpr int kClones = 6;
  std::vector<std::string> seen(kClones);
  std::vector<double> before(kClones), after(kClones);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClones; ++i) {
    threads.emplace_back([&, i] {
      auto box = Box::Create(VmOptions());
      if (!box.ok()) {
        seen[i] = "create failed: " + box.status().ToString();
        return;
      }
      before[i] = Now();
      auto r = (*box)->RunPython(
          "import time, random\n"
          "print(open('/proc/sys/kernel/random/uuid').read().strip(),\n"
          "      open('/proc/sys/kernel/random/boot_id').read().strip(),\n"
          "      open('/etc/machine-id').read().strip(), random.random(), repr(time.time()))\n"
          "open('/tmp/scribble', 'wb').write(b'x' * (32 << 20))\n");
      after[i] = Now();
      seen[i] = r.ok() ? r->stdout_data + r->stderr_data : "run failed: " + r.status().ToString();
      if ((*box)->info().start != first->info().start) seen[i] += " started: " + (*box)->info().start;
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> uuids, boot_ids, machine_ids, randoms;
  for (int i = 0; i < kClones; ++i) {
    std::istringstream words(seen[i]);
    std::string uuid, boot_id, machine_id, random, time, extra;
    ASSERT_TRUE(words >> uuid >> boot_id >> machine_id >> random >> time) << seen[i];
    EXPECT_FALSE(words >> extra) << seen[i];
    uuids.insert(uuid);
    boot_ids.insert(boot_id);
    machine_ids.insert(machine_id);
    randoms.insert(random);
    double guest = std::stod(time);
    EXPECT_GE(guest, before[i] - 1.0) << "clone " << i << "'s clock is behind the host's";
    EXPECT_LE(guest, after[i] + 1.0) << "clone " << i << "'s clock is ahead of the host's";
  }
  EXPECT_EQ(uuids.size(), static_cast<size_t>(kClones));
  EXPECT_EQ(boot_ids.size(), static_cast<size_t>(kClones));
  EXPECT_EQ(machine_ids.size(), static_cast<size_t>(kClones));
  EXPECT_EQ(randoms.size(), static_cast<size_t>(kClones)) << "Python's random seeds are the same";

  // The clones wrote to their RAM; the template's files are as saved.
  EXPECT_TRUE(vm::VerifyTemplate(made).ok()) << vm::VerifyTemplate(made).ToString();

  // A clone's pages of the template are shared: its proportional set is below its resident one.
  std::vector<int> pids = ClonePids(made.dir + "/memory");
  ASSERT_EQ(pids.size(), 1u) << "only the first box still runs";
  auto [pss, rss] = PssAndRss(pids[0]);
  EXPECT_GT(rss, 0u);
  EXPECT_LT(pss, rss) << "PSS " << pss << " KiB, RSS " << rss << " KiB";
}

TEST_F(VmSnapshotTest, APrestartedVmBoxIsAParkedCloneThatRunsWhenTaken) {
  BoxOptions options = VmOptions();
  options.prestart = true;
  const std::string uuid = "print(open('/proc/sys/kernel/random/uuid').read().strip())";
  std::string first_uuid;
  {
    CODEBOX_MAKE_BOX_OR_SKIP(first, options);  // no spare yet: started directly
    auto r = first->RunPython(uuid);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    first_uuid = r->stdout_data;
  }
  // The spare started when the first was taken; this one waits for it if it is not parked yet.
  auto second = Box::Create(options);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ((*second)->info().start.rfind("snapshot ", 0), 0u) << (*second)->info().start;
  auto r = (*second)->RunPython(uuid);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data.size(), 37u) << r->stdout_data;
  EXPECT_NE(r->stdout_data, first_uuid);
  second->reset();

  // The third box's spare is parked now; destroying the spares leaves no QEMU behind.
  std::vector<vm::TemplateInfo> templates = vm::ListTemplates();
  ASSERT_EQ(templates.size(), 1u);
  box::DestroyPrestartedJails();
  EXPECT_TRUE(ClonePids(templates[0].dir + "/memory").empty());
}

// Rewrites `key`'s value in the template's meta (a test that damages a template keeps it
// looking whole, so that QEMU is what refuses it).
void SetMeta(const std::string& dir, const std::string& key, const std::string& value) {
  std::string meta = *base::ReadFile(dir + "/meta");
  size_t at = meta.find(key + "=");
  ASSERT_NE(at, std::string::npos);
  size_t end = meta.find('\n', at);
  meta.replace(at, end - at, key + "=" + value);
  ASSERT_TRUE(base::WriteFile(dir + "/meta", meta).ok());
}

TEST_F(VmSnapshotTest, ADamagedTemplateIsABootWithAWarningOrWithNoFallbackAnError) {
  {
    CODEBOX_MAKE_BOX_OR_SKIP(maker, VmOptions());
  }
  std::vector<vm::TemplateInfo> templates = vm::ListTemplates();
  ASSERT_EQ(templates.size(), 1u);
  std::string dir = templates[0].dir;

  // A state file that is not what was saved: found by its checksum, QEMU never sees it.
  ASSERT_TRUE(base::WriteFile(dir + "/state", "garbage").ok());
  BoxOptions strict = VmOptions();
  strict.no_fallback = true;
  auto refused = Box::Create(strict);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--no-fallback"), std::string::npos)
      << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("damaged"), std::string::npos)
      << refused.status().ToString();
  EXPECT_TRUE(vm::ListTemplates().empty()) << "a damaged template is removed";

  // Made again by the next box; then a state QEMU cannot load, with a checksum that matches.
  {
    auto remade = Box::Create(VmOptions());
    ASSERT_TRUE(remade.ok()) << remade.status().ToString();
    EXPECT_EQ((*remade)->info().start.rfind("snapshot ", 0), 0u);
  }
  ASSERT_TRUE(base::WriteFile(dir + "/state", std::string(4096, 'Q')).ok());
  SetMeta(dir, "state_checksum", *vm::HashFileHex(dir + "/state"));
  auto booted = Box::Create(VmOptions());
  ASSERT_TRUE(booted.ok()) << booted.status().ToString();
  EXPECT_EQ((*booted)->info().start, "boot");
  ASSERT_EQ((*booted)->info().warnings.size(), 1u);
  EXPECT_NE((*booted)->info().warnings[0].find("cold boot"), std::string::npos)
      << (*booted)->info().warnings[0];
  auto r = (*booted)->RunPython("print(6 * 7)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "42\n");
  EXPECT_TRUE(ClonePids(dir + "/memory").empty()) << "the failed restore's QEMU is gone";

  // A RAM file that is not what was saved, its size and state whole: QEMU loads the state and
  // the guest runs garbage and dies, or (when a virtqueue of the guest lay in the overwritten
  // RAM) QEMU's own check of the queue indices refuses the load; either way the box boots
  // instead and says so, and the template is gone.
  {
    auto remade = Box::Create(VmOptions());
    ASSERT_TRUE(remade.ok()) << remade.status().ToString();
    ASSERT_EQ((*remade)->info().start.rfind("snapshot ", 0), 0u);
  }
  {
    base::UniqueFd memory(::open((dir + "/memory").c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(memory.valid());
    std::string garbage(1 << 20, '\xcc');  // int3, over the kernel and everything else
    for (off_t at = 0; at < (64 << 20); at += garbage.size()) {
      ASSERT_EQ(::pwrite(memory.get(), garbage.data(), garbage.size(), at),
                static_cast<ssize_t>(garbage.size()));
    }
  }
  auto survived = Box::Create(VmOptions());
  ASSERT_TRUE(survived.ok()) << survived.status().ToString();
  EXPECT_EQ((*survived)->info().start, "boot");
  ASSERT_EQ((*survived)->info().warnings.size(), 1u);
  const std::string& warning = (*survived)->info().warnings[0];
  EXPECT_TRUE(warning.find("did not answer") != std::string::npos ||
              warning.find("restoring from a template failed") != std::string::npos)
      << warning;
  EXPECT_TRUE(vm::ListTemplates().empty());
  auto answer = (*survived)->RunPython("print(6 * 7)");
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(answer->stdout_data, "42\n");

  BoxOptions cold = VmOptions();
  cold.no_snapshot = true;
  auto plain = Box::Create(cold);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ((*plain)->info().start, "boot");
  EXPECT_TRUE((*plain)->info().warnings.empty());
}

}  // namespace
}  // namespace codebox
