#include "fake_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

extern char** environ;

namespace codebox::llm::testing {
namespace {

// The image's python3 on PATH may be a pyenv shim; the system one is always there on Debian.
std::string Python() { return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3"; }

}  // namespace

FakeServer::~FakeServer() { Stop(); }

Status FakeServer::Start(const std::string& scenario) {
  static int counter = 0;
  log_path_ = "/tmp/codebox_fake_openai_" + std::to_string(getpid()) + "_" +
              std::to_string(counter++) + ".jsonl";
  unlink(log_path_.c_str());
  int in_pipe[2], out_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0) {
    return IoError("pipe failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  std::string python = Python();
  std::string script = CODEBOX_FAKE_SERVER;
  std::string scenario_path = std::string(CODEBOX_SCENARIOS) + "/" + scenario;
  std::vector<std::string> args = {python, script, "--script", scenario_path, "--log", log_path_,
                                   "--max-seconds", "300"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int rc = posix_spawnp(&pid_, python.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in_pipe[0]);
  close(out_pipe[1]);
  stdin_fd_ = in_pipe[1];
  if (rc != 0) {
    close(out_pipe[0]);
    pid_ = -1;
    return IoError("spawn " + python + " failed");
  }
  std::string line;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd p = {out_pipe[0], POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    char buf[256];
    ssize_t n = read(out_pipe[0], buf, sizeof buf);
    if (n <= 0) break;
    line.append(buf, n);
  }
  close(out_pipe[0]);
  if (line.rfind("PORT ", 0) != 0) return IoError("fake server did not start: '" + line + "'");
  port_ = std::stoi(line.substr(5));
  return Status::Ok();
}

std::vector<nlohmann::json> FakeServer::Requests() const {
  std::vector<nlohmann::json> requests;
  std::ifstream in(log_path_);
  std::string line;
  while (std::getline(in, line)) requests.push_back(nlohmann::json::parse(line));
  return requests;
}

void FakeServer::Stop() {
  if (stdin_fd_ >= 0) close(stdin_fd_);  // the server exits when its stdin closes
  stdin_fd_ = -1;
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  if (!log_path_.empty()) unlink(log_path_.c_str());
}

int UnusedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace codebox::llm::testing
