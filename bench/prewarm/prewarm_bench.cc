// Prewarm benchmark: time to the first result of `print(1)`. In one run, interleaved so they
// share the machine's noise, median and p99 of:
//   * RunPython on a box prewarmed beforehand (Box::Prewarm: its python3 is up and waiting);
//     creating and prewarming the box are not timed, as a server's warm pool does them ahead;
//   * a cold RunPython (`python3 -c`) on a box created beforehand (one box, reused);
//   * a bare host `/usr/bin/python3 -c 'print(1)'` with its output piped, the baseline;
//   * the same with -S (no site module, so no .pth file of the host's site-packages runs): the
//     host's floor, for hosts whose site-packages make start-up slow.
// Then the ratios against both (the serve issue's target for a pool box's first result is
// <= 0.3x bare).
//
// usage: bench_prewarm [--runs N] [--image NAME] [--code PROGRAM]
//   N: 1..2000, default 100; PROGRAM (default print(1)) must print 1.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/subprocess.h"
#include "bench/common/bench_common.h"
#include "codebox/box.h"

namespace {

using codebox::bench::Clock;
using codebox::bench::Ms;
using codebox::bench::Percentile;

int Fail(const std::string& what) {
  std::fprintf(stderr, "bench_prewarm: %s\n", what.c_str());
  return 1;
}

void Row(const char* what, const std::vector<double>& ms, double bare, double bare_s) {
  double median = Percentile(ms, 0.5);
  std::printf("  %-44s %8.2f  %8.2f   %5.2fx  %5.2fx\n", what, median, Percentile(ms, 0.99),
              median / bare, median / bare_s);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 100;
  std::string image = "python", code = "print(1)";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::clamp(std::atoi(argv[i + 1]), 1, 2000);
    if (std::strcmp(argv[i], "--image") == 0) image = argv[i + 1];
    if (std::strcmp(argv[i], "--code") == 0) code = argv[i + 1];
  }
  codebox::BoxOptions options;
  options.driver = codebox::DriverKind::kJail;
  options.image = image;

  auto cold_box = codebox::Box::Create(options);
  if (!cold_box.ok()) return Fail("create box: " + cold_box.status().ToString());
  const codebox::base::Command bare_python({"/usr/bin/python3", "-c", code});
  const codebox::base::Command bare_python_s({"/usr/bin/python3", "-S", "-c", code});
  std::vector<double> warm, cold, bare, bare_s, prewarm, create;
  for (int i = -3; i < runs; ++i) {  // three rounds of warm-up, not counted
    auto t0 = Clock::now();
    auto box = codebox::Box::Create(options);
    if (!box.ok()) return Fail("create box: " + box.status().ToString());
    auto t1 = Clock::now();
    codebox::Status st = (*box)->Prewarm();
    if (!st.ok()) return Fail("prewarm: " + st.ToString());
    auto t2 = Clock::now();
    auto w = (*box)->RunPython(code);
    auto t3 = Clock::now();
    if (!w.ok() || w->stdout_data != "1\n")
      return Fail("prewarmed RunPython did not print 1 (" +
                  (w.ok() ? w->stderr_data : w.status().ToString()) + ")");
    box->reset();  // destroying is not part of the result

    auto t4 = Clock::now();
    auto c = (*cold_box)->RunPython(code);
    auto t5 = Clock::now();
    if (!c.ok() || c->stdout_data != "1\n") return Fail("cold RunPython did not print 1");

    auto t6 = Clock::now();
    auto b = codebox::base::Run(bare_python);
    auto t7 = Clock::now();
    auto bs = codebox::base::Run(bare_python_s);
    auto t8 = Clock::now();
    if (!bs.ok() || !bs->ok() || bs->out != "1\n") return Fail("host python3 -S failed");
    if (!b.ok() || !b->ok() || b->out != "1\n") return Fail("host /usr/bin/python3 failed");
    if (i < 0) continue;
    create.push_back(Ms(t1 - t0));
    prewarm.push_back(Ms(t2 - t1));
    warm.push_back(Ms(t3 - t2));
    cold.push_back(Ms(t5 - t4));
    bare.push_back(Ms(t7 - t6));
    bare_s.push_back(Ms(t8 - t7));
  }
  const double base = Percentile(bare, 0.5), base_s = Percentile(bare_s, 0.5);
  std::printf("bench_prewarm: %d runs of %s, image %s, ms\n", runs, code.c_str(), image.c_str());
  std::printf("  %-44s %8s  %8s   %6s  %6s\n", "", "median", "p99", "/bare", "/-S");
  Row("RunPython on a prewarmed box", warm, base, base_s);
  Row("RunPython, cold python3 on a created box", cold, base, base_s);
  Row("bare host /usr/bin/python3 -c PROGRAM", bare, base, base_s);
  Row("bare host /usr/bin/python3 -S -c PROGRAM", bare_s, base, base_s);
  std::printf("  not timed above: Box::Create %.1f, Prewarm %.1f (medians)\n",
              Percentile(create, 0.5), Percentile(prewarm, 0.5));
  std::printf("  target: prewarmed <= 0.3x bare\n");

  // What a waiting python3 costs a pool box: its memory, as the box's kernel counts it.
  auto box = codebox::Box::Create(options);
  if (!box.ok() || !(*box)->Prewarm().ok()) return Fail("create and prewarm a box");
  auto mem = (*box)->Exec(
      {"python3", "-c",
       "import os\n"
       "for p in filter(str.isdigit, os.listdir('/proc')):\n"
       "    if b'_codebox_war' b'm' in open(f'/proc/{p}/cmdline', 'rb').read():\n"
       "        m = dict(l.split(':') for l in open(f'/proc/{p}/smaps_rollup') if ':' in l)\n"
       "        print(*(m[k].split()[0] for k in ('Rss', 'Pss', 'Private_Dirty')))"});
  long rss = 0, pss = 0, dirty = 0;
  if (!mem.ok() || std::sscanf(mem->stdout_data.c_str(), "%ld %ld %ld", &rss, &pss, &dirty) != 3) {
    return Fail("could not read the waiting python3's memory");
  }
  std::printf("  a waiting python3: Rss %ld KiB, Pss %ld KiB, Private_Dirty %ld KiB\n", rss, pss,
              dirty);
  return 0;
}
