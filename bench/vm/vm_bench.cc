// vm_bench: how far a vm box is from the floor of its kernel and accelerator.
//   floor:  plain QEMU microvm, same kernel, same command line, a minimal static /init that
//           prints a line; timed from spawn until the line is in the console log.
//   launch: Machine::Start + protocol handshake (agent ready).
//   full:   launch -> exec python3 -c 'print(1)' -> destroy.
// Runs interleave floor and box so load on the host hits both alike. Also prints the guest's
// memory use at idle (/proc/meminfo) and QEMU's host RSS for one idle box.
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
  req.argv = {"python3", "-c", code};
  req.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", "/root"}};
  req.cwd = "/work";
  req.timeout = std::chrono::seconds(60);
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

  // Warm the caches (initramfs, erofs disk) outside the timed runs.
  {
    auto m = Machine::Start(config);
    if (!m.ok()) Die("warm-up: " + m.status().ToString());
  }

  std::vector<double> floor_ms, launch_ms, full_ms;
  std::string driver;
  for (int run = 0; run < runs; ++run) {
    floor_ms.push_back(FloorBoot(floor));
    auto start = Clock::now();
    auto m = Machine::Start(config);
    if (!m.ok()) Die("start: " + m.status().ToString());
    auto client = protocol::AgentClient::Connect((*m)->TakeAgentFd(), std::chrono::seconds(10));
    if (!client.ok()) Die("connect: " + client.status().ToString());
    launch_ms.push_back(Ms(Clock::now() - start));
    auto r = (*client)->Exec(Python("print(1)"));
    if (!r.ok() || r->stdout_data != "1\n")
      Die("exec python: " + (r.ok() ? r->stderr_data : r.status().ToString()));
    client->reset();
    if (!(*m)->Destroy().ok()) Die("destroy failed");
    full_ms.push_back(Ms(Clock::now() - start));
    driver = (*m)->driver_name();
    std::fprintf(stderr, "run %d: floor %.0f ms, launch %.0f ms, full %.0f ms\n", run + 1,
                 floor_ms.back(), launch_ms.back(), full_ms.back());
  }

  // Idle footprint of one box.
  auto m = Machine::Start(config);
  if (!m.ok()) Die("start: " + m.status().ToString());
  auto client = protocol::AgentClient::Connect((*m)->TakeAgentFd(), std::chrono::seconds(10));
  if (!client.ok()) Die("connect: " + client.status().ToString());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  auto meminfo = (*client)->ReadFile("/proc/meminfo");
  auto status = base::ReadFile("/proc/" + std::to_string((*m)->qemu_pid()) + "/status");
  long total = meminfo.ok() ? MeminfoKib(*meminfo, "MemTotal") : -1;
  long avail = meminfo.ok() ? MeminfoKib(*meminfo, "MemAvailable") : -1;
  long rss = status.ok() ? MeminfoKib(*status, "VmRSS") : -1;
  client->reset();
  (void)(*m)->Destroy();
  (void)base::RemoveTree(*tmp);

  double floor_med = Median(floor_ms), launch_med = Median(launch_ms), full_med = Median(full_ms);
  std::printf("vm_bench: kernel %s, driver %s, %d runs, medians\n", kernel->release.c_str(),
              driver.c_str(), runs);
  std::printf("  floor (plain microvm, minimal init, line on console)  %8.0f ms\n", floor_med);
  std::printf("  launch -> agent ready                                 %8.0f ms   %.2fx floor\n",
              launch_med, launch_med / floor_med);
  std::printf("  create -> exec python3 -c 'print(1)' -> destroy        %8.0f ms   %.2fx floor\n",
              full_med, full_med / floor_med);
  std::printf("  guest memory used at idle (MemTotal-MemAvailable)     %8.1f MiB of %.1f MiB\n",
              (total - avail) / 1024.0, total / 1024.0);
  std::printf("  host RSS of one idle vm box (QEMU VmRSS)              %8.1f MiB\n", rss / 1024.0);
  return 0;
}

}  // namespace
}  // namespace codebox::vm

int main(int argc, char** argv) { return codebox::vm::Main(argc, argv); }
