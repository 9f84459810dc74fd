// What serve_bench needs around the server: a `codebox serve` subprocess on a unix socket in a
// temp dir, JSON requests to it, timing and the host's memory. Bench-only code.
#ifndef CODEBOX_BENCH_SERVE_SERVE_BENCH_UTIL_H_
#define CODEBOX_BENCH_SERVE_SERVE_BENCH_UTIL_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/common/bench_common.h"
#include "http/client.h"

namespace codebox::bench {


// Runs argv with stdout/stderr to /dev/null; its exit status, or -1.
int Spawn(const std::vector<std::string>& argv);

struct Samples {
  std::vector<double> ms;
  double Median() const;
  double P99() const;
};
// fn's time in ms, or nullopt when it failed.
std::optional<double> Timed(const std::function<bool()>& fn);
// One warm-up, then `runs` samples of what fn measured; stops at the first failure (which is
// printed) and at 120 s.
Samples TimeRuns(int runs, const std::function<std::optional<double>()>& fn);
// "  label   median  p99  ratio  note"
void PrintRow(const char* label, const Samples& s, const Samples& baseline, const char* note);

// fn(0..n-1) on `threads` threads.
void RunThreads(int threads, int n, const std::function<void(int)>& fn);

long MemAvailableKib();
// PSS of `pid` and every process under it.
long ProcessTreePssKib(pid_t pid);

class ServerProcess {
 public:
  // `codebox serve --listen unix:<tmp>/codebox.sock` plus `flags`; waits for /healthz (60 s).
  ServerProcess(const std::string& cli, const std::vector<std::string>& flags);
  ~ServerProcess();  // SIGTERM, then SIGKILL after 30 s; removes the temp dir
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  bool ok() const { return pid_ > 0 && ready_; }
  // Until every pool is full (false, with a message, at the deadline or when not ok()).
  bool WaitPoolsReady(std::chrono::milliseconds deadline);
  // The JSON answer of a 2xx, else nullopt (the reason in *error when given).
  std::optional<nlohmann::json> PostJson(const std::string& target, const nlohmann::json& body,
                                         std::string* error = nullptr);
  std::optional<nlohmann::json> GetJson(const std::string& target);
  bool Delete(const std::string& target);
  const std::string& socket() const { return socket_; }
  pid_t pid() const { return pid_; }

 private:
  std::string dir_, socket_, log_;
  pid_t pid_ = -1;
  bool ready_ = false;
  std::unique_ptr<http::Client> client_;
};

}  // namespace codebox::bench

#endif  // CODEBOX_BENCH_SERVE_SERVE_BENCH_UTIL_H_
