// Prints, side by side: exec through codebox-agent vs fork/exec in this process, and file
// throughput over the socketpair in both directions. Run:
//   build/agent/bin/agent_bench [exec_runs=200] [file_mib=200]
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "agent_harness.h"
#include "base/io.h"

extern char** environ;

namespace codebox {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The baseline: what a host program pays to run the same command itself, capturing output.
double DirectExecMs(const std::vector<std::string>& argv) {
  auto start = Clock::now();
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) std::abort();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) != 0) std::abort();
  ::close(out[1]);
  char buf[4096];
  while (::read(out[0], buf, sizeof buf) > 0) {
  }
  ::close(out[0]);
  int status;
  ::waitpid(pid, &status, 0);
  posix_spawn_file_actions_destroy(&actions);
  return MsSince(start);
}

void CompareExec(protocol::AgentClient& client, const std::vector<std::string>& argv, int runs) {
  protocol::ExecRequest req;
  req.exec.argv = argv;
  req.exec.env = {{"PATH", "/usr/bin:/bin"}};
  req.exec.timeout = std::chrono::seconds(30);
  std::vector<double> agent_ms, direct_ms;
  for (int i = 0; i < runs; ++i) {
    // Interleaved, so drift in machine load hits both sides alike.
    auto start = Clock::now();
    auto r = client.Exec(req);
    agent_ms.push_back(MsSince(start));
    if (!r.ok() || r->exit_code != 0) {
      std::fprintf(stderr, "exec failed: %s\n", r.status().ToString().c_str());
      std::exit(1);
    }
    direct_ms.push_back(DirectExecMs(argv));
  }
  double a = Median(agent_ms), d = Median(direct_ms);
  std::string name;
  for (const auto& s : argv) name += (name.empty() ? "" : " ") + s;
  std::printf("exec %-28s runs=%-4d agent median %7.3f ms | fork/exec %7.3f ms | ratio %5.2fx | "
              "overhead %+.3f ms/exec\n",
              name.c_str(), runs, a, d, a / d, a - d);
}

void FileThroughput(protocol::AgentClient& client, size_t mib) {
  // tmpfs when there is one, so the figures measure the protocol, not this machine's disk.
  std::string tmpl = (::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + std::string("/codebox-agent-bench-XXXXXX");
  char* dir = tmpl.data();
  if (::mkdtemp(dir) == nullptr) std::abort();
  std::string data(mib << 20, '\0');
  for (size_t i = 0; i < data.size(); i += 4096) data[i] = static_cast<char>(i / 4096);
  std::string box = std::string(dir) + "/box.bin";
  double mb = static_cast<double>(data.size()) / 1e6;

  auto start = Clock::now();
  if (!base::WriteFile(std::string(dir) + "/baseline.bin", data).ok()) std::abort();
  std::printf("file %zu MiB in %s: plain write() here (the ceiling) %8.0f MB/s\n", mib, dir,
              mb / (MsSince(start) / 1000));
  ::unlink((std::string(dir) + "/baseline.bin").c_str());
  start = Clock::now();
  Status up = client.WriteFile(box, data);
  double up_ms = MsSince(start);
  start = Clock::now();
  auto down = client.ReadFile(box);
  double down_ms = MsSince(start);
  if (!up.ok() || !down.ok() || *down != data) {
    std::fprintf(stderr, "file transfer failed: %s %s\n", up.ToString().c_str(),
                 down.status().ToString().c_str());
    std::exit(1);
  }
  std::printf("file %zu MiB host->box (memory->file) %8.0f MB/s | box->host (file->memory) %8.0f MB/s\n",
              mib, mb / (up_ms / 1000), mb / (down_ms / 1000));

  std::string host_in = std::string(dir) + "/in.bin", host_out = std::string(dir) + "/out.bin";
  if (!base::WriteFile(host_in, data).ok()) std::abort();
  start = Clock::now();
  up = client.WriteFileFromHost(host_in, box);
  up_ms = MsSince(start);
  start = Clock::now();
  base::UniqueFd out(::open(host_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out.valid()) std::abort();
  Status down_file = client.ReadFileStream(
      box, data.size(), [](uint64_t, uint32_t) { return Status::Ok(); },
      [&out](std::string_view chunk) { return base::WriteAll(out.get(), chunk); });
  out.reset();
  down_ms = MsSince(start);
  if (!up.ok() || !down_file.ok()) std::exit(1);
  std::printf("file %zu MiB host->box (file->file)   %8.0f MB/s | box->host (file->file)   %8.0f MB/s\n",
              mib, mb / (up_ms / 1000), mb / (down_ms / 1000));
  std::system((std::string("rm -rf ") + dir).c_str());
}

int Main(int argc, char** argv) {
  int runs = argc > 1 ? std::atoi(argv[1]) : 200;
  size_t mib = argc > 2 ? static_cast<size_t>(std::atoi(argv[2])) : 200;
  auto agent = testing::AgentProcess::Start();
  if (!agent.ok()) return 1;
  auto client = (*agent)->Connect();
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  CompareExec(**client, {"/bin/true"}, runs);
  CompareExec(**client, {"/usr/bin/python3", "-c", "pass"}, std::max(10, runs / 10));
  FileThroughput(**client, mib);
  return 0;
}

}  // namespace
}  // namespace codebox

int main(int argc, char** argv) { return codebox::Main(argc, argv); }
