// Load generator for `codebox serve` (issue: serve with warm pools). Starts the server as a
// subprocess on a unix socket in a temp dir (loopback only: nothing leaves this machine), and
// prints, each against a baseline measured in the same run:
//   1. a fresh pool box's first result, POST /v1/run of print(1), vs bare python3 -c 'print(1)';
//   2. `codebox run --server` vs bare python3;
//   3. HumanEval (164 problems) through POST /v1/run, a fresh box each, vs bare subprocesses;
//   4. fresh boxes per second by pool size;
//   5. 100 concurrent sessions running `1+1` cells: p50 and p99;
//   6. idle boxes: host memory per box, and how many the server holds.
// Every loop is bounded in count and in time.
//
// usage: serve_bench [--runs N] [--humaneval PATH] [--skip-humaneval] [--sessions N]
//                    [--idle N] [--only SECTION,...]
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/paths.h"
#include "bench/common/bench_common.h"
#include "bench/serve/serve_bench_util.h"

namespace {

using namespace codebox::bench;
using nlohmann::json;

struct Args {
  int runs = 20;
  std::string humaneval = "../shared/data/HumanEval.jsonl";
  bool skip_humaneval = false;
  int sessions = 100;
  int idle = 600;
  std::set<std::string> only;
  bool Want(const std::string& s) const { return only.empty() || only.count(s) > 0; }
};

// 1 and 2: time to a first result.
void FirstResult(const Args& args, const std::string& cli) {
  ServerProcess server(cli, {"--pool", "python=4,driver=jail"});
  if (!server.WaitPoolsReady(std::chrono::seconds(120))) return;
  Samples bare = TimeRuns(args.runs, [] {
    return Timed([] { return Spawn({"/usr/bin/python3", "-c", "print(1)"}) == 0; });
  });
  int from_pool = 0;
  Samples run = TimeRuns(args.runs, [&] {
    // Each sample takes a pool box that is ready: wait for the refill first (not timed).
    if (!server.WaitPoolsReady(std::chrono::seconds(30))) return std::optional<double>();
    return Timed([&] {
      auto r = server.PostJson("/v1/run", json{{"code", "print(1)"}});
      if (!r || (*r)["stdout"] != "1\n") return false;
      from_pool += (*r)["box"]["from_pool"] == true;
      return true;
    });
  });
  Samples via_cli = TimeRuns(args.runs, [&] {
    if (!server.WaitPoolsReady(std::chrono::seconds(30))) return std::optional<double>();
    return Timed([&] {
      return Spawn({cli, "run", "--server", "unix:" + server.socket(), "print(1)"}) == 0;
    });
  });
  std::printf("first result, %d runs (ms):            median      p99   median/bare\n", args.runs);
  PrintRow("bare /usr/bin/python3 -c 'print(1)'", bare, bare, "");
  PrintRow("POST /v1/run print(1), pool box", run, bare, "(target <= 0.3x)");
  std::printf("    (%d of %zu answered from a pool box, the warm-up included)\n", from_pool,
              run.ms.size() + 1);
  PrintRow("codebox run --server (CLI start incl.)", via_cli, bare, "(target <= 0.7x)");
}

// 3: HumanEval, each problem in a fresh box through POST /v1/run.
void HumanEval(const Args& args, const std::string& cli) {
  auto loaded = LoadHumanEvalPrograms(args.humaneval);
  if (!loaded) {
    std::printf("\nHumanEval: cannot read %s (--humaneval PATH); skipped\n", args.humaneval.c_str());
    return;
  }
  const std::vector<std::string>& programs = *loaded;
  int bare_pass = 0;
  auto start = Clock::now();
  for (const auto& p : programs) bare_pass += Spawn({"/usr/bin/python3", "-c", p}) == 0;
  double bare_wall = Ms(Clock::now() - start);

  std::printf("\nHumanEval (%zu problems, a fresh box each through POST /v1/run):\n", programs.size());
  std::printf("  bare python3, one after another:   %3d passed  %8.0f ms wall\n", bare_pass, bare_wall);
  for (int clients : {1, 2}) {
    ServerProcess server(cli, {"--pool", "python=4,driver=jail"});
    if (!server.WaitPoolsReady(std::chrono::seconds(120))) return;
    std::atomic<int> pass{0}, next{0};
    auto begin = Clock::now();
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&] {
        for (int i; (i = next++) < static_cast<int>(programs.size());) {
          auto r = server.PostJson("/v1/run", json{{"code", programs[i]}, {"timeout", 30}});
          pass += r && (*r)["exit_code"] == 0;
        }
      });
    }
    for (auto& t : threads) t.join();
    double wall = Ms(Clock::now() - begin);
    std::printf("  codebox serve, %d client(s):         %3d passed  %8.0f ms wall  %.2fx  "
                "(target %zu/%zu, <= 1.0x)\n",
                clients, pass.load(), wall, wall / bare_wall, programs.size(), programs.size());
  }
}

// 4: fresh boxes per second, by pool size (4 clients, 40 requests each pool size).
void Throughput(const std::string& cli) {
  std::printf("\nfresh boxes per second (POST /v1/run print(1), 4 clients, 40 requests):\n");
  for (int pool : {0, 1, 2, 4, 8}) {
    std::vector<std::string> flags;
    if (pool > 0) flags = {"--pool", "python=" + std::to_string(pool) + ",driver=jail"};
    ServerProcess server(cli, flags);
    if (!server.WaitPoolsReady(std::chrono::seconds(120))) return;
    std::atomic<int> ok{0}, next{0};
    auto begin = Clock::now();
    std::vector<std::thread> threads;
    for (int c = 0; c < 4; ++c) {
      threads.emplace_back([&] {
        while (next++ < 40) {
          auto r = server.PostJson("/v1/run", json{{"code", "print(1)"}, {"driver", "jail"}});
          ok += r && (*r)["stdout"] == "1\n";
        }
      });
    }
    for (auto& t : threads) t.join();
    double s = Ms(Clock::now() - begin) / 1000;
    std::printf("  pool %d: %5.1f boxes/s  (%d/40 ok)\n", pool, ok.load() / s, ok.load());
  }
}

// 5: N sessions at once, each running ten `1+1` cells.
void Sessions(const Args& args, const std::string& cli) {
  int n = args.sessions;
  ServerProcess server(cli, {"--max-boxes", std::to_string(n + 8)});
  if (!server.WaitPoolsReady(std::chrono::seconds(30))) return;
  std::vector<std::string> ids(n);
  std::atomic<int> made{0};
  RunThreads(std::min(n, 8), n, [&](int i) {
    auto r = server.PostJson("/v1/boxes", json{{"driver", "jail"}});
    if (!r) return;
    ids[i] = (*r)["id"];
    // The kernel's start is not what this measures: one cell starts it.
    if (server.PostJson("/v1/boxes/" + ids[i] + "/run_code", json{{"code", "0"}})) ++made;
  });
  std::vector<double> latencies;
  std::mutex mu;
  std::atomic<int> good{0};
  auto begin = Clock::now();
  RunThreads(n, n, [&](int i) {
    if (ids[i].empty()) return;
    for (int k = 0; k < 10; ++k) {
      auto start = Clock::now();
      auto r = server.PostJson("/v1/boxes/" + ids[i] + "/run_code", json{{"code", "1+1"}});
      double ms = Ms(Clock::now() - start);
      bool ok = r && !(*r)["results"].empty() && (*r)["results"][0]["data"]["text/plain"] == "2";
      good += ok;
      std::lock_guard<std::mutex> lock(mu);
      latencies.push_back(ms);
    }
  });
  double wall = Ms(Clock::now() - begin);
  for (const auto& id : ids) {
    if (!id.empty()) server.Delete("/v1/boxes/" + id);
  }
  Samples s{latencies};
  std::printf("\n%d concurrent sessions (%d started), 10 cells `1+1` each: %d/%zu right, "
              "p50 %.1f ms, p99 %.1f ms, %.0f cells/s\n",
              n, made.load(), good.load(), latencies.size(), s.Median(), s.P99(),
              latencies.size() / (wall / 1000));
}

// 6: idle boxes until `idle` boxes, a failure or 180 s.
void IdleBoxes(const Args& args, const std::string& cli) {
  ServerProcess server(cli, {"--max-boxes", std::to_string(args.idle + 8), "--idle-timeout", "none"});
  if (!server.WaitPoolsReady(std::chrono::seconds(30))) return;
  long avail_before = MemAvailableKib();
  auto deadline = Clock::now() + std::chrono::seconds(180);
  int count = 0;
  std::string stopped = "reached --idle " + std::to_string(args.idle);
  while (count < args.idle) {
    if (Clock::now() > deadline) {
      stopped = "time limit (180 s)";
      break;
    }
    std::string error;
    auto r = server.PostJson("/v1/boxes", json{{"driver", "jail"}}, &error);
    if (!r) {
      stopped = "create failed: " + error.substr(0, 200);
      break;
    }
    ++count;
  }
  long avail_after = MemAvailableKib();
  long server_pss = ProcessTreePssKib(server.pid());
  std::printf("\nidle jail boxes held by one server: %d (stopped: %s)\n", count, stopped.c_str());
  if (count > 0) {
    std::printf("  host memory per idle box: %.0f KiB by MemAvailable, %.0f KiB by PSS of the "
                "server's process tree  (target >= 500 boxes in 24 GiB: <= 48 MiB each)\n",
                double(avail_before - avail_after) / count, double(server_pss) / count);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (!std::strcmp(argv[i], "--runs")) args.runs = std::atoi(next().c_str());
    else if (!std::strcmp(argv[i], "--humaneval")) args.humaneval = next();
    else if (!std::strcmp(argv[i], "--skip-humaneval")) args.skip_humaneval = true;
    else if (!std::strcmp(argv[i], "--sessions")) args.sessions = std::atoi(next().c_str());
    else if (!std::strcmp(argv[i], "--idle")) args.idle = std::atoi(next().c_str());
    else if (!std::strcmp(argv[i], "--only")) {
      std::string list = next();
      for (size_t p = 0; p <= list.size();) {
        size_t c = std::min(list.find(',', p), list.size());
        args.only.insert(list.substr(p, c - p));
        p = c + 1;
      }
    } else {
      std::fprintf(stderr, "serve_bench: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (args.runs < 1 || args.runs > 1000 || args.sessions < 1 || args.sessions > 1000 ||
      args.idle < 1 || args.idle > 5000) {
    std::fprintf(stderr, "serve_bench: --runs 1..1000, --sessions 1..1000, --idle 1..5000\n");
    return 2;
  }
  std::string cli = codebox::base::SelfExeDir() + "/codebox";
  if (args.Want("first")) FirstResult(args, cli);
  if (args.Want("humaneval") && !args.skip_humaneval) HumanEval(args, cli);
  if (args.Want("throughput")) Throughput(cli);
  if (args.Want("sessions")) Sessions(args, cli);
  if (args.Want("idle")) IdleBoxes(args, cli);
  return 0;
}
