// Code-interpreter session benchmark. In one run, side by side (medians):
//   * a warm session's round trip of a `1+1` cell (Box::RunCode on a jail box with the python
//     image) against IPython's own in-process `run_cell("1+1")` on the host;
//   * box start to kernel ready (Box::Create + the first RunCode, which starts the kernel)
//     against a bare host `python3 -c "import IPython"`.
// The host baselines use the host's /usr/bin/python3 with Debian's python3-ipython.
//
// usage: kernel_bench [--cells N] [--starts N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "base/subprocess.h"
#include "bench/common/bench_common.h"
#include "codebox/box.h"

namespace {

using codebox::bench::Clock;
using codebox::bench::Ms;
using codebox::bench::Percentile;

// Runs a host command to its end (its output read and dropped); false when it failed.
bool Spawn(const std::vector<std::string>& argv) {
  auto r = codebox::base::Run(codebox::base::Command(argv));
  return r.ok() && r->ok();
}

// IPython's own cost of a `1+1` cell, in process on the host: median ms of `cells` run_cell
// calls after a warm-up (the display goes to /dev/null, as a terminal would show it).
double HostRunCellMs(int cells) {
  std::string script =
      "import sys, os, time, statistics\n"
      "out = sys.stdout\n"
      "sys.stdout = open(os.devnull, \"w\")\n"
      "from IPython.core.interactiveshell import InteractiveShell\n"
      "from traitlets.config import Config\n"
      "c = Config(); c.HistoryManager.enabled = False\n"
      "shell = InteractiveShell.instance(config=c)\n"
      "for _ in range(20): shell.run_cell(\"1+1\", store_history=True)\n"
      "samples = []\n"
      "for _ in range(" +
      std::to_string(cells) +
      "):\n"
      "    t = time.perf_counter(); shell.run_cell(\"1+1\", store_history=True)\n"
      "    samples.append(time.perf_counter() - t)\n"
      "print(\"%.4f\" % (statistics.median(samples) * 1e3), file=out)\n";
  std::string command =
      "IPYTHONDIR=/tmp/.kernel-bench-ipython /usr/bin/python3 -c '" + script + "'";
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[64] = {};
  bool got = std::fgets(buf, sizeof buf, p) != nullptr;
  int rc = ::pclose(p);
  return got && rc == 0 ? std::atof(buf) : -1;
}

codebox::BoxOptions Options() {
  codebox::BoxOptions o;
  o.driver = codebox::DriverKind::kJail;
  o.image = "python";
  return o;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "kernel_bench: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int cells = 500, starts = 15;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--cells") == 0)
      cells = std::max(1, std::min(100000, std::atoi(argv[i + 1])));
    if (std::strcmp(argv[i], "--starts") == 0)
      starts = std::max(1, std::min(1000, std::atoi(argv[i + 1])));
  }

  // 1. Warm-session round trip against IPython's own run_cell.
  auto box = codebox::Box::Create(Options());
  if (!box.ok()) return Fail("create box: " + box.status().ToString());
  for (int i = 0; i < 20; ++i) {  // the kernel starts on the first; then warm-up
    auto e = (*box)->RunCode("1+1");
    if (!e.ok() || e->text() != "2") return Fail("warm-up cell failed");
  }
  std::vector<double> trips;
  for (int i = 0; i < cells; ++i) {
    auto start = Clock::now();
    auto e = (*box)->RunCode("1+1");
    trips.push_back(Ms(Clock::now() - start));
    if (!e.ok() || e->text() != "2") return Fail("cell failed");
  }
  box->reset();
  double run_cell = HostRunCellMs(cells);
  if (run_cell < 0) return Fail("the host baseline failed: /usr/bin/python3 with python3-ipython?");
  double trip = Percentile(trips, 0.5);
  std::printf("kernel_bench: %d cells, %d starts, medians (ms)\n", cells, starts);
  std::printf("  warm 1+1 cell round trip (Box::RunCode)   %8.3f   (p90 %.3f)\n", trip,
              Percentile(trips, 0.9));
  std::printf("  host IPython run_cell('1+1') in process   %8.3f\n", run_cell);
  std::printf("  codebox overhead per cell                 %8.3f   (target <= 2 ms median)\n",
              trip - run_cell);

  // 2. Box start to kernel ready against a bare host import of IPython.
  std::vector<double> ready, create, import;
  for (int i = 0; i < starts; ++i) {
    auto t0 = Clock::now();
    auto b = codebox::Box::Create(Options());
    auto t1 = Clock::now();
    if (!b.ok()) return Fail("create box: " + b.status().ToString());
    auto e = (*b)->RunCode("None");
    auto t2 = Clock::now();
    if (!e.ok()) return Fail("first cell: " + e.status().ToString());
    create.push_back(Ms(t1 - t0));
    ready.push_back(Ms(t2 - t0));
    b->reset();  // destroying is not part of the start
    auto t3 = Clock::now();
    if (!Spawn({"/usr/bin/python3", "-c", "import IPython"}))
      return Fail("python3 -c 'import IPython' failed on the host");
    import.push_back(Ms(Clock::now() - t3));
  }
  double r = Percentile(ready, 0.5), imp = Percentile(import, 0.5);
  std::printf("  box start to kernel ready (first cell)    %8.1f   (of which Box::Create %.1f)\n",
              r, Percentile(create, 0.5));
  std::printf("  host python3 -c 'import IPython'          %8.1f\n", imp);
  std::printf("  ratio                                     %8.2fx  (target <= 1.3x)\n", r / imp);
  return 0;
}
