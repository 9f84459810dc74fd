#include "host_runner.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace codebox::llm::testing {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class HostPythonRunner final : public CodeRunner {
 public:
  HostPythonRunner() {
    char tmpl[] = "/tmp/codebox_host_runner_XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~HostPythonRunner() override { std::filesystem::remove_all(dir_); }

  StatusOr<ExecResult> RunPython(std::string_view code) override {
    return Exec({"/usr/bin/python3", "-c", std::string(code)});
  }

  StatusOr<ExecResult> Exec(const std::vector<std::string>& args) override {
    if (args.empty() || args[0] != "/usr/bin/python3") {
      return Unavailable("the host test runner runs only python");
    }
    auto start = std::chrono::steady_clock::now();
    std::string out = dir_ + "/.stdout", err = dir_ + "/.stderr";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addchdir_np(&actions, dir_.c_str());
    std::vector<std::string> copy = args;
    std::vector<char*> argv;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    char* empty_env[] = {nullptr};  // like a box: nothing of the host's environment
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), empty_env);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return IoError("spawn python3 failed");
    int status = 0;
    waitpid(pid, &status, 0);
    ExecResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    r.stdout_data = Slurp(out);
    r.stderr_data = Slurp(err);
    r.driver = "host-test";
    r.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    return r;
  }

  Status CopyIn(const std::string&, const std::string&) override {
    return Unavailable("the host test runner has no /data");
  }
  Status CopyOut(const std::string&, const std::string&, const CopyOutOptions&) override {
    return Unavailable("the host test runner has no /work");
  }
  std::string driver() const override { return "host-test"; }

 private:
  std::string dir_;
};

}  // namespace

std::unique_ptr<CodeRunner> MakeHostPythonRunner() { return std::make_unique<HostPythonRunner>(); }

}  // namespace codebox::llm::testing
