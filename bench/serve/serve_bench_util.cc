#include "bench/serve/serve_bench_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

extern char** environ;

namespace codebox::bench {

namespace {

pid_t SpawnWithOutput(const std::vector<std::string>& argv, const std::string& out_path) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

std::string Tail(const std::string& path, size_t bytes) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

}  // namespace

int Spawn(const std::vector<std::string>& argv) {
  pid_t pid = SpawnWithOutput(argv, "/dev/null");
  if (pid < 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

double Samples::Median() const { return ms.empty() ? 0 : Percentile(ms, 0.5); }
double Samples::P99() const { return ms.empty() ? 0 : Percentile(ms, 0.99); }

std::optional<double> Timed(const std::function<bool()>& fn) {
  auto start = Clock::now();
  if (!fn()) return std::nullopt;
  return Ms(Clock::now() - start);
}

Samples TimeRuns(int runs, const std::function<std::optional<double>()>& fn) {
  Samples s;
  auto deadline = Clock::now() + std::chrono::seconds(120);
  if (!fn()) {
    std::printf("  (the warm-up run failed)\n");
    return s;
  }
  for (int i = 0; i < runs && Clock::now() < deadline; ++i) {
    auto ms = fn();
    if (!ms) {
      std::printf("  (run %d failed; stopping this series)\n", i + 1);
      break;
    }
    s.ms.push_back(*ms);
  }
  return s;
}

void PrintRow(const char* label, const Samples& s, const Samples& baseline, const char* note) {
  double base = baseline.Median();
  std::printf("  %-40s %8.1f %8.1f   %5.2fx  %s\n", label, s.Median(), s.P99(),
              base > 0 ? s.Median() / base : 0.0, note);
}

void RunThreads(int threads, int n, const std::function<void(int)>& fn) {
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int i; (i = next++) < n;) fn(i);
    });
  }
  for (auto& t : pool) t.join();
}

long MemAvailableKib() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long value = 0;
  std::string unit;
  while (in >> key >> value >> unit) {
    if (key == "MemAvailable:") return value;
  }
  return -1;
}

long ProcessTreePssKib(pid_t root) {
  std::map<pid_t, pid_t> parent;
  DIR* d = opendir("/proc");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) {
    pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state;
    pid_t ppid;
    if (rest >> state >> ppid) parent[pid] = ppid;
  }
  closedir(d);
  long total = 0;
  for (const auto& [pid, _] : parent) {
    pid_t p = pid;
    for (int depth = 0; depth < 64 && p > 1 && p != root; ++depth) {
      auto it = parent.find(p);
      p = it == parent.end() ? 0 : it->second;
    }
    if (p != root) continue;
    std::ifstream smaps("/proc/" + std::to_string(pid) + "/smaps_rollup");
    for (std::string line; std::getline(smaps, line);) {
      if (line.rfind("Pss:", 0) == 0) total += std::atol(line.c_str() + 4);
    }
  }
  return total;
}

ServerProcess::ServerProcess(const std::string& cli, const std::vector<std::string>& flags) {
  char tmpl[] = "/tmp/codebox-serve-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return;
  dir_ = tmpl;
  socket_ = dir_ + "/codebox.sock";
  log_ = dir_ + "/serve.log";
  std::vector<std::string> argv = {cli, "serve", "--listen", "unix:" + socket_};
  argv.insert(argv.end(), flags.begin(), flags.end());
  pid_ = SpawnWithOutput(argv, log_);
  if (pid_ < 0) {
    std::printf("  cannot start %s serve\n", cli.c_str());
    return;
  }
  http::Address address;
  address.kind = http::Address::Kind::kUnix;
  address.path = socket_;
  client_ = std::make_unique<http::Client>(address);
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
    if (GetJson("/healthz")) {
      ready_ = true;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::printf("  the server did not come up; its log ends:\n%s\n", Tail(log_, 2000).c_str());
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    auto deadline = Clock::now() + std::chrono::seconds(30);
    while (waitpid(pid_, nullptr, WNOHANG) != pid_) {
      if (Clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

bool ServerProcess::WaitPoolsReady(std::chrono::milliseconds deadline_in) {
  if (!ok()) return false;
  auto deadline = Clock::now() + deadline_in;
  while (Clock::now() < deadline) {
    auto status = GetJson("/v1/status");
    if (status && status->contains("pools")) {
      bool full = true;
      for (const auto& pool : (*status)["pools"]) full &= pool["ready"] == pool["target"];
      if (full) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::printf("  the pools did not fill in time; the server's log ends:\n%s\n",
              Tail(log_, 2000).c_str());
  return false;
}

std::optional<nlohmann::json> ServerProcess::PostJson(const std::string& target,
                                                      const nlohmann::json& body,
                                                      std::string* error) {
  if (!client_) return std::nullopt;
  http::ClientRequest request;
  request.method = "POST";
  request.target = target;
  request.body = body.dump();
  request.timeout = std::chrono::seconds(120);
  auto r = client_->Send(request);
  if (!r.ok() || r->status / 100 != 2) {
    if (error) *error = r.ok() ? std::to_string(r->status) + " " + r->body : r.status().ToString();
    return std::nullopt;
  }
  auto j = nlohmann::json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::optional<nlohmann::json> ServerProcess::GetJson(const std::string& target) {
  if (!client_) return std::nullopt;
  http::ClientRequest request;
  request.target = target;
  request.timeout = std::chrono::seconds(10);
  auto r = client_->Send(request);
  if (!r.ok() || r->status != 200) return std::nullopt;
  auto j = nlohmann::json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

bool ServerProcess::Delete(const std::string& target) {
  if (!client_) return false;
  http::ClientRequest request;
  request.method = "DELETE";
  request.target = target;
  auto r = client_->Send(request);
  return r.ok() && r->status / 100 == 2;
}

}  // namespace codebox::bench
