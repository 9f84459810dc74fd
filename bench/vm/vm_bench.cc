// vm_bench: how far a vm box is from the floor of its kernel and accelerator.
//   floor:  plain QEMU microvm, same kernel, same command line, a minimal static /init that
//           prints a line; timed from spawn until the line is in the console log.
//   ready:  Machine::Start + protocol handshake (agent ready), by a cold boot, by a restore
//           from the template (src/vm/snapshot.h) into a fresh QEMU, and by resuming a
//           machine parked ahead of time (Machine::StartParked: QEMU started, state loaded).
//   full:   ready -> exec python3 -c 'print(1)' -> destroy.
// Runs interleave floor, boot and restore so load on the host hits all alike. Also prints the
// guest's memory use at idle (/proc/meminfo) and QEMU's host RSS and PSS for an idle booted
// box and an idle clone.
//
//   vm_bench [--runs N]     (default 5; uses $CODEBOX_HOME's python image and kernel)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/fs.h"
#include "base/io.h"
#include "base/paths.h"
#include "base/subprocess.h"
#include "image/store.h"
#include "agent_client/agent_client.h"
#include "vm/accel.h"
#include "vm/cpio.h"
#include "vm/guest_limits.h"
#include "vm/kernel.h"
#include "vm/qemu.h"
#include "vm/vm.h"

namespace codebox::vm {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty()      ? 0
         : v.size() % 2 ? v[v.size() / 2]
                        : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "vm_bench: %s\n", what.c_str());
  std::exit(1);
}

// QEMU's argv for a box with the devices taken out: the floor differs only in its /init.
std::vector<std::string> FloorArgv(QemuLaunch launch) {
  std::vector<std::string> full = QemuArgv(launch), argv;
  for (size_t i = 0; i < full.size(); ++i) {
    const std::string& a = full[i];
    bool device = a == "-drive" || a == "-device" || a == "-mon" ||
                  (a == "-chardev" && i + 1 < full.size() && full[i + 1].rfind("socket", 0) == 0);
    if (device) {
      ++i;
      continue;
    }
    argv.push_back(a);
  }
  return argv;
}

double FloorBoot(const QemuLaunch& launch) {
  ::unlink(launch.console_log.c_str());
  auto start = Clock::now();
  auto pid = base::Spawn(base::Command(FloorArgv(launch)));
  if (!pid.ok()) Die("floor: " + pid.status().ToString());
  double ms = -1;
  while (Clock::now() - start < std::chrono::seconds(120)) {
    auto log = base::ReadFile(launch.console_log);
    if (log.ok() && log->find("CODEBOX-FLOOR-READY") != std::string::npos) {
      ms = Ms(Clock::now() - start);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::kill(*pid, SIGKILL);
  ::waitpid(*pid, nullptr, 0);
  if (ms < 0) Die("floor: the line never appeared");
  return ms;
}

protocol::ExecRequest Python(const std::string& code) {
  protocol::ExecRequest req;
  req.exec.argv = {"python3", "-c", code};
  req.exec.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", "/root"}};
  req.exec.cwd = "/work";
  req.exec.timeout = std::chrono::seconds(60);
  return req;
}

long MeminfoKib(const std::string& meminfo, const std::string& key) {
  size_t at = meminfo.find(key + ":");
  return at == std::string::npos ? -1 : std::atol(meminfo.c_str() + at + key.size() + 1);
}

int Main(int argc, char** argv) {
  int runs = 5;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
      runs = std::max(1, std::atoi(argv[++i]));
  }
  VmConfig config;
  config.home = base::CodeboxHome("");
  config.allow_emulation = true;
  config.agent_path = base::FindHelperBinary("codebox-agent");
  if (config.agent_path.empty()) Die("codebox-agent not found (build it beside vm_bench)");
  auto image = image::FindImage(config.home, "python");
  if (!image.ok()) Die(image.status().message() + " (run: codebox image build python)");
  config.image_tree = image->rootfs;
  auto kernel = EnsureKernel(config.home);
  if (!kernel.ok()) Die(kernel.status().ToString());
  auto accel = ChooseAccelerator(config.allow_emulation);
  if (!accel.ok()) Die(accel.status().ToString());

  // The floor's initramfs: dev/console and the static floor init, nothing else.
  std::string floor_init = base::SelfExeDir() + "/vm_floor_init";
  auto init = base::ReadFile(floor_init);
  if (!init.ok()) Die("read " + floor_init + ": " + init.status().message());
  auto tmp = base::MakeTempDir("/tmp", "vm_bench_");
  if (!tmp.ok()) Die(tmp.status().ToString());
  CpioWriter cpio;
  cpio.AddDirectory("dev");
  cpio.AddCharDevice("dev/console", 5, 1);
  cpio.AddFile("init", *init, 0755);
  if (!base::WriteFile(*tmp + "/floor.cpio", cpio.Finish()).ok()) Die("write floor.cpio");
  QemuLaunch floor;
  floor.qemu = QemuBinary();
  floor.accel = *accel;
  floor.kernel = kernel->vmlinuz;
  floor.initramfs = *tmp + "/floor.cpio";
  floor.console_log = *tmp + "/floor.log";
  floor.memory_mib = config.memory_mib;
  floor.cpus = config.cpus;
  floor.disk_mib = config.disk_mib;
  floor.tsc_khz = HostTscKhz();

  // Warm the caches (initramfs, erofs disk, the template) outside the timed runs.
  {
    auto m = Machine::Start(config);
    if (!m.ok()) Die("warm-up: " + m.status().ToString());
  }

  // Start to agent ready (the handshake done), then print(1) and destroy.
  auto connect = [&](Machine& m) {
    auto client = protocol::AgentClient::Connect(m.TakeAgentFd(), std::chrono::seconds(10),
                                                 MakeGuestSetup(m, config));
    if (!client.ok()) Die("connect: " + client.status().ToString());
    return std::move(*client);
  };
  struct Cycle {
    std::vector<double> ready, full;
  };
  // kBoot, kRestore: Machine::Start; kParked: StartParked outside the clock, Resume in it.
  enum class How { kBoot, kRestore, kParked };
  auto cycle = [&](How how, Cycle* out, std::string* driver) {
    VmConfig c = config;
    c.snapshot = how != How::kBoot;
    c.snapshot_fallback = false;
    StatusOr<std::unique_ptr<Machine>> m = Internal("not started");
    auto start = Clock::now();
    if (how == How::kParked) {
      m = Machine::StartParked(c);
      if (!m.ok()) Die("park: " + m.status().ToString());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // parked ahead of need
      start = Clock::now();
      if (!(*m)->Resume(c.start_timeout).ok()) Die("resume failed");
      std::fprintf(stderr, "  (parked: resumed in %.1f ms)\n", Ms(Clock::now() - start));
    } else {
      m = Machine::Start(c);
    }
    if (!m.ok()) Die("start: " + m.status().ToString());
    auto client = connect(**m);
    out->ready.push_back(Ms(Clock::now() - start));
    auto r = client->Exec(Python("print(1)"));
    if (!r.ok() || r->stdout_data != "1\n")
      Die("exec python: " + (r.ok() ? r->stderr_data : r.status().ToString()));
    client.reset();
    if (!(*m)->Destroy().ok()) Die("destroy failed");
    out->full.push_back(Ms(Clock::now() - start));
    *driver = (*m)->driver_name();
  };
  std::vector<double> floor_ms;
  Cycle cold, restored, parked;
  std::string driver;
  for (int run = 0; run < runs; ++run) {
    floor_ms.push_back(FloorBoot(floor));
    cycle(How::kBoot, &cold, &driver);
    cycle(How::kRestore, &restored, &driver);
    cycle(How::kParked, &parked, &driver);
    std::fprintf(stderr,
                 "run %d: floor %.0f ms, boot: ready %.0f full %.0f ms, restore: ready %.0f full "
                 "%.0f ms, parked: ready %.0f full %.0f ms\n",
                 run + 1, floor_ms.back(), cold.ready.back(), cold.full.back(),
                 restored.ready.back(), restored.full.back(), parked.ready.back(),
                 parked.full.back());
  }

  // Idle footprint: one booted box alone, then three clones side by side (their RAM file's
  // pages are shared, so each one's proportional share is what one more costs).
  struct Footprint {
    double rss_kib = 0, pss_kib = 0, guest_used_kib = 0, guest_total_kib = 0;
  };
  auto footprint = [&](bool snapshot, int count) {
    VmConfig c = config;
    c.snapshot = snapshot;
    std::vector<std::unique_ptr<Machine>> machines;
    std::vector<std::unique_ptr<protocol::AgentClient>> clients;
    for (int i = 0; i < count; ++i) {
      auto m = Machine::Start(c);
      if (!m.ok()) Die("start: " + m.status().ToString());
      clients.push_back(connect(**m));
      machines.push_back(std::move(*m));
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));
    Footprint f;
    auto meminfo = clients[0]->ReadFile("/proc/meminfo");
    if (meminfo.ok()) {
      f.guest_total_kib = MeminfoKib(*meminfo, "MemTotal");
      f.guest_used_kib = f.guest_total_kib - MeminfoKib(*meminfo, "MemAvailable");
    }
    auto rollup = base::ReadFile("/proc/" + std::to_string(machines[0]->qemu_pid()) + "/smaps_rollup");
    if (rollup.ok()) {
      f.rss_kib = MeminfoKib(*rollup, "Rss");
      f.pss_kib = MeminfoKib(*rollup, "Pss");
    }
    clients.clear();
    for (auto& m : machines) (void)m->Destroy();
    return f;
  };
  Footprint booted = footprint(false, 1), clone = footprint(true, 3);
  (void)base::RemoveTree(*tmp);

  double floor_med = Median(floor_ms);
  double boot_ready = Median(cold.ready), boot_full = Median(cold.full);
  double clone_ready = Median(restored.ready), clone_full = Median(restored.full);
  double parked_ready = Median(parked.ready), parked_full = Median(parked.full);
  std::printf("vm_bench: kernel %s, driver %s, %d runs, medians\n", kernel->release.c_str(),
              driver.c_str(), runs);
  std::printf("  floor (plain microvm, minimal init, line on console)  %8.0f ms\n", floor_med);
  std::printf("  cold boot -> agent ready                              %8.0f ms   %.2fx floor\n",
              boot_ready, boot_ready / floor_med);
  std::printf("  restore (fresh QEMU) -> agent ready                   %8.0f ms   %.3fx cold boot\n",
              clone_ready, clone_ready / boot_ready);
  std::printf("  restore (parked QEMU) -> agent ready                  %8.0f ms   %.3fx cold boot\n",
              parked_ready, parked_ready / boot_ready);
  std::printf("  cold boot: create -> print(1) -> destroy              %8.0f ms\n", boot_full);
  std::printf("  restore:   create -> print(1) -> destroy              %8.0f ms   %.2fx cold boot\n",
              clone_full, clone_full / boot_full);
  std::printf("  parked:    create -> print(1) -> destroy              %8.0f ms   %.2fx cold boot\n",
              parked_full, parked_full / boot_full);
  std::printf("  guest memory used at idle (MemTotal-MemAvailable)     %8.1f MiB of %.1f MiB\n",
              booted.guest_used_kib / 1024.0, booted.guest_total_kib / 1024.0);
  std::printf("  idle booted box: QEMU RSS %.1f MiB, PSS %.1f MiB\n", booted.rss_kib / 1024.0,
              booted.pss_kib / 1024.0);
  std::printf("  idle clone (1 of 3): QEMU RSS %.1f MiB, PSS %.1f MiB   PSS %.2fx booted box's\n",
              clone.rss_kib / 1024.0, clone.pss_kib / 1024.0, clone.pss_kib / booted.pss_kib);
  return 0;
}

}  // namespace
}  // namespace codebox::vm

int main(int argc, char** argv) { return codebox::vm::Main(argc, argv); }
