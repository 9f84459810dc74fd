// Box start-to-result benchmark (issue: jail driver). In one run, side by side, medians of
// N runs: bare python3, python3 under bwrap with comparable isolation, a fresh codebox jail
// box through the C++ API (create -> Run("print(1)") -> destroy) and through the CLI; then the
// 164 HumanEval problems each in a fresh box against each as a bare subprocess; then the host
// memory of idle boxes.
//
// usage: box_bench [--runs N] [--humaneval PATH] [--skip-humaneval]
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/paths.h"
#include "bench/common/bench_common.h"
#include "box/spares.h"
#include "codebox/box.h"
#include "image/store.h"

extern char** environ;

namespace {

using codebox::bench::Clock;
using codebox::bench::Ms;

// Runs argv with stdout/stderr to /dev/null; returns the exit status (or -1).
int Spawn(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Times fn `runs` times (after one warm-up); returns the median in ms, or -1 if fn failed.
double TimeMedian(int runs, const std::function<bool()>& fn) {
  if (!fn()) return -1;
  std::vector<double> samples;
  for (int i = 0; i < runs; ++i) {
    auto start = Clock::now();
    if (!fn()) return -1;
    samples.push_back(Ms(Clock::now() - start));
  }
  return Median(samples);
}

codebox::BoxOptions JailOptions() {
  codebox::BoxOptions o;
  o.driver = codebox::DriverKind::kJail;
  return o;
}

// Proportional set size (KiB) of every process whose command line starts with a codebox
// helper; PSS splits shared pages fairly between boxes.
long CodeboxHelpersPssKib() {
  long total = 0;
  FILE* ps = popen("for p in /proc/[0-9]*; do if tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^[^ ]*codebox-\\(jail\\|agent\\)'; then "
                   "awk '/^Pss:/{print $2}' $p/smaps_rollup 2>/dev/null; fi; done", "r");
  if (ps == nullptr) return -1;
  long kib;
  while (std::fscanf(ps, "%ld", &kib) == 1) total += kib;
  pclose(ps);
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 20;
  std::string humaneval = "../shared/data/HumanEval.jsonl";
  bool skip_humaneval = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) runs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--humaneval") && i + 1 < argc) humaneval = argv[++i];
    else if (!std::strcmp(argv[i], "--skip-humaneval")) skip_humaneval = true;
  }
  auto image = codebox::image::FindImage(codebox::base::CodeboxHome(), "python");
  if (!image.ok()) {
    std::fprintf(stderr, "box_bench: %s\n", image.status().message().c_str());
    return 1;
  }
  std::string cli = codebox::base::SelfExeDir() + "/codebox";

  std::printf("start-to-result, median of %d runs (ms):\n", runs);
  double bare = TimeMedian(runs, [] { return Spawn({"/usr/bin/python3", "-c", "print(1)"}) == 0; });
  double bwrap = TimeMedian(runs, [&] {
    return Spawn({"bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
                  "--ro-bind", image->rootfs, "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs",
                  "/tmp", "--cap-drop", "ALL", "/usr/bin/python3", "-c", "print(1)"}) == 0;
  });
  double api = TimeMedian(runs, [] {
    auto box = codebox::Box::Create(JailOptions());
    if (!box.ok()) {
      std::fprintf(stderr, "box: %s\n", box.status().message().c_str());
      return false;
    }
    auto out = (*box)->Run("print(1)");
    return out.ok() && *out == "1\n";
  });
  double prestarted = TimeMedian(runs, [] {
    codebox::BoxOptions o = JailOptions();
    o.prestart = true;
    auto box = codebox::Box::Create(o);
    if (!box.ok()) return false;
    auto out = (*box)->Run("print(1)");
    return out.ok() && *out == "1\n";
  });
  codebox::box::DestroyPrestartedJails();
  double via_cli = TimeMedian(runs, [&] { return Spawn({cli, "run", "--driver", "jail", "print(1)"}) == 0; });
  std::printf("  %-44s %8.1f   1.00x\n", "bare /usr/bin/python3 -c 'print(1)'", bare);
  std::printf("  %-44s %8.1f   %.2fx\n", "bwrap (all namespaces, ro image root)", bwrap, bwrap / bare);
  std::printf("  %-44s %8.1f   %.2fx   (target <= 1.5x)\n", "codebox jail box via C++ API", api, api / bare);
  std::printf("  %-44s %8.1f   %.2fx\n", "codebox jail box via C++ API, prestart", prestarted,
              prestarted / bare);
  std::printf("  %-44s %8.1f   %.2fx\n", "codebox jail box via CLI", via_cli, via_cli / bare);

  {
    const int kIdle = 10;
    long before = CodeboxHelpersPssKib();
    std::vector<std::unique_ptr<codebox::Box>> boxes;
    for (int i = 0; i < kIdle; ++i) {
      auto box = codebox::Box::Create(JailOptions());
      if (box.ok()) boxes.push_back(std::move(*box));
    }
    long after = CodeboxHelpersPssKib();
    std::printf("\nhost memory of an idle jail box (PSS of supervisor + agent, %zu boxes): %.0f KiB per box\n",
                boxes.size(), boxes.empty() ? 0.0 : double(after - before) / boxes.size());
  }

  if (skip_humaneval) return 0;
  auto loaded = codebox::bench::LoadHumanEvalPrograms(humaneval);
  if (!loaded) {
    std::fprintf(stderr, "box_bench: cannot read %s (--humaneval PATH)\n", humaneval.c_str());
    return 1;
  }
  const std::vector<std::string>& programs = *loaded;
  int bare_pass = 0;
  auto start = Clock::now();
  for (const auto& p : programs) bare_pass += Spawn({"/usr/bin/python3", "-c", p}) == 0;
  double bare_wall = Ms(Clock::now() - start);
  // Each problem in a fresh box: started on demand, then with a prestarted spare.
  auto in_boxes = [&](bool prestart, double* wall) {
    int pass = 0;
    codebox::BoxOptions options = JailOptions();
    options.prestart = prestart;
    auto begin = Clock::now();
    for (const auto& p : programs) {
      auto box = codebox::Box::Create(options);
      if (!box.ok()) continue;
      auto r = (*box)->RunPython(p);
      pass += r.ok() && r->exit_code == 0;
    }
    *wall = Ms(Clock::now() - begin);
    codebox::box::DestroyPrestartedJails();
    return pass;
  };
  double box_wall = 0, prestart_wall = 0;
  int box_pass = in_boxes(false, &box_wall);
  int prestart_pass = in_boxes(true, &prestart_wall);
  size_t n = programs.size();
  std::printf("\nHumanEval (%zu problems, each in a fresh box vs a bare subprocess):\n", n);
  std::printf("  bare python3:               %3d/%zu passed, %8.0f ms wall\n", bare_pass, n, bare_wall);
  std::printf("  codebox jail box:           %3d/%zu passed, %8.0f ms wall   %.2fx   (target %zu/%zu, <= 2x)\n",
              box_pass, n, box_wall, box_wall / bare_wall, n, n);
  std::printf("  codebox jail box, prestart: %3d/%zu passed, %8.0f ms wall   %.2fx\n", prestart_pass, n,
              prestart_wall, prestart_wall / bare_wall);
  return box_pass == static_cast<int>(n) && prestart_pass == static_cast<int>(n) ? 0 : 1;
}
