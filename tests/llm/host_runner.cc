#include "host_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/io.h"
#include "base/subprocess.h"
#include "base/unique_fd.h"

namespace codebox::llm::testing {
namespace {

using nlohmann::json;

// Longest wait for one cell of a scenario.
constexpr int kCellTimeoutMs = 60'000;

class HostPythonRunner final : public CodeRunner {
 public:
  HostPythonRunner() {
    char tmpl[] = "/tmp/codebox_host_runner_XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~HostPythonRunner() override {
    to_kernel_ = base::UniqueFd();  // its stdin closes: it ends
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove_all(dir_);
  }

  StatusOr<Execution> RunCode(std::string_view code) override {
    auto start = std::chrono::steady_clock::now();
    if (pid_ <= 0) RETURN_IF_ERROR(Start());
    RETURN_IF_ERROR(base::WriteAll(to_kernel_.get(), json{{"code", code}}.dump() + "\n"));
    ASSIGN_OR_RETURN(std::string line, ReadLine());
    json j = json::parse(line, nullptr, false);
    if (!j.is_object()) return ProtocolError("host_kernel.py replied " + line);
    Execution e;
    e.stdout_chunks = j["stdout"].get<std::vector<std::string>>();
    e.stderr_chunks = j["stderr"].get<std::vector<std::string>>();
    for (const json& r : j["results"]) {
      CellResult result;
      result.data = r["data"].get<std::map<std::string, std::string>>();
      result.is_main_result = r["is_main_result"];
      e.results.push_back(std::move(result));
    }
    if (j["error"].is_object()) {
      e.error = CellError{j["error"]["name"], j["error"]["value"], j["error"]["traceback"]};
    }
    e.execution_count = j["execution_count"];
    e.driver = "host-test";
    e.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    return e;
  }

  StatusOr<ExecResult> Exec(const std::vector<std::string>&) override {
    return Unavailable("the host test runner runs only cells");
  }
  Status CopyIn(const std::string&, const std::string&) override {
    return Unavailable("the host test runner has no /data");
  }
  Status CopyOut(const std::string&, const std::string&, const CopyOutOptions&) override {
    return Unavailable("the host test runner has no /work");
  }
  std::string driver() const override { return "host-test"; }

 private:
  Status Start() {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
      return base::ErrnoStatus("pipe");
    }
    base::UniqueFd in_read(in[0]), out_write(out[1]);
    to_kernel_ = base::UniqueFd(in[1]);
    from_kernel_ = base::UniqueFd(out[0]);
    base::Command command({"/usr/bin/python3", CODEBOX_HOST_KERNEL});
    // Like a box: nothing of the host's environment (its API keys), only a home of its own.
    command.env = {"HOME=" + dir_, "IPYTHONDIR=" + dir_ + "/.ipython"};
    command.cwd = dir_;
    command.fds = {{in_read.get(), 0}, {out_write.get(), 1}};
    ASSIGN_OR_RETURN(pid_, base::Spawn(command));
    return Status::Ok();
  }

  StatusOr<std::string> ReadLine() {
    while (true) {
      size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        return line;
      }
      pollfd p{from_kernel_.get(), POLLIN, 0};
      if (::poll(&p, 1, kCellTimeoutMs) != 1) return DeadlineExceeded("host_kernel.py is silent");
      char chunk[65536];
      ssize_t n = ::read(from_kernel_.get(), chunk, sizeof chunk);
      if (n <= 0) return BoxCrashed("host_kernel.py ended");
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  std::string dir_;
  pid_t pid_ = -1;
  base::UniqueFd to_kernel_, from_kernel_;
  std::string buffer_;
};

}  // namespace

std::unique_ptr<CodeRunner> MakeHostPythonRunner() { return std::make_unique<HostPythonRunner>(); }

}  // namespace codebox::llm::testing
