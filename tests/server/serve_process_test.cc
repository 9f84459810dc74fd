// `codebox serve` as a process of its own: kill -9 and a restart with the same home leave
// nothing of the dead server behind (supervisors, jail staging directories, cgroups, /tmp
// entries) and the pools refill; SIGTERM drains and exits 0; --exit-on-stdin-eof stops it when
// its parent's end of the stdin pipe closes, and --private-dir is removed then.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/fs.h"
#include "base/owner.h"
#include "http/client.h"
#include "testing/box_test_util.h"

namespace codebox::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string CodeboxBinary() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string path(self, n > 0 ? n : 0);
  return path.substr(0, path.rfind('/')) + "/codebox";
}

class ServeProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string skip;
    auto probe = MakeBoxOrSkipReason(TestBoxOptions(), &skip);
    if (!probe) GTEST_SKIP() << skip;
    if (access(CodeboxBinary().c_str(), X_OK) != 0) GTEST_SKIP() << "no " << CodeboxBinary();
    auto dir = base::MakeTempDir(base::TempRoot(), "codebox-serve-test-");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    socket_ = dir_ + "/codebox.sock";
  }
  void TearDown() override {
    for (pid_t pid : children_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (!dir_.empty()) (void)base::RemoveTree(dir_);
  }

  // Starts `codebox serve` and waits (30 s at most) for its "listening" line. With `stdin_fd`
  // (the read end of a pipe) it is the server's stdin, and `extra` adds flags.
  pid_t StartServe(int stdin_fd = -1, const std::vector<std::string>& extra = {}) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return -1;
    std::vector<std::string> args = {CodeboxBinary(), "serve",    "--listen", "unix:" + socket_,
                                     "--pool",        "python=2", "--driver", "jail",
                                     "--drain",       "5"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_t pid = fork();
    if (pid == 0) {
      if (stdin_fd >= 0) dup2(stdin_fd, 0);
      dup2(out[1], 1);
      int log = open((dir_ + "/serve.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      dup2(log, 2);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    children_.push_back(pid);
    std::string line;
    auto end = Clock::now() + std::chrono::seconds(30);
    while (line.find('\n') == std::string::npos && Clock::now() < end) {
      pollfd p{out[0], POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char buf[512];
      ssize_t n = read(out[0], buf, sizeof buf);
      if (n <= 0) break;
      line.append(buf, n);
    }
    close(out[0]);
    EXPECT_NE(line.find("listening on unix:" + socket_), std::string::npos) << line;
    EXPECT_NE(line.find("pools: python=2"), std::string::npos) << line;
    return pid;
  }

  // Runs `codebox serve ARGS` that must refuse to start: its exit status (-1 if it still ran
  // after 20 s) and stderr.
  std::pair<int, std::string> ServeRefuses(std::vector<std::string> args) {
    args.insert(args.begin(), {CodeboxBinary(), "serve"});
    const std::string err = dir_ + "/refused.err";
    pid_t pid = fork();
    if (pid == 0) {
      int fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    int wstatus = 0;
    pid_t waited = 0;
    for (auto end = Clock::now() + std::chrono::seconds(20); waited == 0 && Clock::now() < end;) {
      waited = waitpid(pid, &wstatus, WNOHANG);
      if (waited == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (waited != pid) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return {-1, ""};
    }
    std::ifstream in(err);
    std::stringstream text;
    text << in.rdbuf();
    return {WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1, text.str()};
  }

  // stdout of a short command (bounded by its own client deadlines).
  static std::string CommandOutput(const std::vector<std::string>& args) {
    std::string line;
    for (const std::string& a : args) line += "'" + a + "' ";
    std::string out;
    if (FILE* p = popen(line.c_str(), "r")) {
      char buf[4096];
      for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
      pclose(p);
    }
    return out;
  }

  http::Client Client() const { return http::Client(*http::ParseAddress("unix:" + socket_)); }

  json Get(const std::string& target) {
    http::ClientRequest r;
    r.target = target;
    auto response = Client().Send(r);
    if (!response.ok() || response->status != 200) return nullptr;
    return json::parse(response->body, nullptr, false);
  }

  // Waits (90 s at most) for the pool to hold `ready` boxes.
  bool PoolFills(uint32_t ready) {
    for (auto end = Clock::now() + std::chrono::seconds(90); Clock::now() < end;) {
      json health = Get("/healthz");
      if (health.is_object() && !health["pools"].empty() && health["pools"][0]["ready"] == ready) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  std::string RunPrint(int i) {
    http::ClientRequest r;
    r.method = "POST";
    r.target = "/v1/run";
    r.body = json({{"code", "print(" + std::to_string(i) + ")"}}).dump();
    auto response = Client().Send(r);
    if (!response.ok()) return response.status().ToString();
    return json::parse(response->body, nullptr, false).value("stdout", response->body);
  }

  struct Leftovers {
    int supervisors, staging, cgroups, tmp;
    bool none() const { return supervisors + staging + cgroups + tmp == 0; }
  };
  Leftovers LeftoversOf(pid_t pid, const std::string& tag) {
    return {CountSupervisorsOf(pid),
            CountDirEntries("/run/codebox-jail", std::to_string(pid) + "-"), CountCgroupsOf(pid),
            CountDirEntriesContaining("/tmp", tag)};
  }

  std::string dir_, socket_;
  std::vector<pid_t> children_;
};

TEST_F(ServeProcessTest, KillNineThenRestartReapsEverythingAndRefills) {
  pid_t first = StartServe();
  ASSERT_GT(first, 0);
  const std::string tag =
      std::to_string(first) + "-" + std::to_string(base::ProcessStartTime(first));
  ASSERT_TRUE(PoolFills(2)) << "the pool did not fill; see " << dir_ << "/serve.log";
  http::ClientRequest create;
  create.method = "POST";
  create.target = "/v1/boxes";
  auto box = Client().Send(create);
  ASSERT_TRUE(box.ok() && box->status == 201);
  EXPECT_EQ(RunPrint(1), "1\n");
  Leftovers alive = LeftoversOf(first, tag);
  EXPECT_GE(alive.supervisors, 3) << "two pool boxes and one registered box";
  EXPECT_GE(alive.staging, 1);

  ASSERT_EQ(kill(first, SIGKILL), 0);
  ASSERT_EQ(waitpid(first, nullptr, 0), first);
  children_.erase(children_.begin());

  pid_t second = StartServe();
  ASSERT_GT(second, 0);
  ASSERT_TRUE(PoolFills(2)) << "the pools did not refill after the restart";
  Leftovers dead = LeftoversOf(first, tag);
  for (auto end = Clock::now() + std::chrono::seconds(10); !dead.none() && Clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    dead = LeftoversOf(first, tag);
  }
  EXPECT_EQ(dead.supervisors, 0);
  EXPECT_EQ(dead.staging, 0) << "jail staging directories of the killed server";
  EXPECT_EQ(dead.cgroups, 0) << "cgroups of the killed server";
  EXPECT_EQ(dead.tmp, 0) << "/tmp entries of the killed server";
  EXPECT_EQ(RunPrint(2), "2\n");
  json status = Get("/v1/status");
  ASSERT_TRUE(status.is_object());
  EXPECT_TRUE(status["boxes"].empty()) << "the new server holds none of the old one's boxes";

  // The real metrics and `codebox status` against this server.
  http::ClientRequest metrics;
  metrics.target = "/metrics";
  auto text = Client().Send(metrics);
  ASSERT_TRUE(text.ok());
  for (const char* family : {"codebox_pool_ready{", "codebox_requests_total{",
                             "codebox_exec_duration_seconds_bucket{", "codebox_boxes{"}) {
    EXPECT_NE(text->body.find(family), std::string::npos) << family << " in\n" << text->body;
  }
  std::string table = CommandOutput({CodeboxBinary(), "status", "--server", "unix:" + socket_});
  EXPECT_NE(table.find("python=2"), std::string::npos) << table;
  json as_json = json::parse(
      CommandOutput({CodeboxBinary(), "status", "--server", "unix:" + socket_, "--json"}), nullptr,
      false);
  ASSERT_TRUE(as_json.is_object());
  EXPECT_EQ(as_json["pools"][0]["spec"], "python=2");

  // SIGTERM: drain, destroy every box, exit 0, nothing left.
  const std::string second_tag =
      std::to_string(second) + "-" + std::to_string(base::ProcessStartTime(second));
  ASSERT_EQ(kill(second, SIGTERM), 0);
  int wstatus = 0;
  pid_t waited = 0;
  for (auto end = Clock::now() + std::chrono::seconds(30); waited == 0 && Clock::now() < end;) {
    waited = waitpid(second, &wstatus, WNOHANG);
    if (waited == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(waited, second) << "codebox serve did not exit within 30 s of SIGTERM";
  children_.clear();
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << wstatus;
  Leftovers after = LeftoversOf(second, second_tag);
  EXPECT_TRUE(after.none()) << after.supervisors << " " << after.staging << " " << after.cgroups
                            << " " << after.tmp;
  EXPECT_FALSE(base::PathExists(socket_)) << "the socket file is removed on exit";
}

// What the Node package's private server relies on: its parent holds the write end of the
// server's stdin; when that closes (the parent ended, even by kill -9) the server stops as on
// SIGTERM, destroys its boxes and removes its private directory (the socket's).
TEST_F(ServeProcessTest, StdinEofStopsTheServerAndRemovesItsPrivateDir) {
  const std::string private_dir = dir_ + "/private";
  ASSERT_EQ(mkdir(private_dir.c_str(), 0700), 0);
  socket_ = private_dir + "/codebox.sock";
  int in[2];
  ASSERT_EQ(pipe2(in, O_CLOEXEC), 0);
  pid_t pid = StartServe(in[0], {"--exit-on-stdin-eof", "--private-dir", private_dir});
  close(in[0]);
  ASSERT_GT(pid, 0);
  const std::string tag = std::to_string(pid) + "-" + std::to_string(base::ProcessStartTime(pid));
  ASSERT_TRUE(PoolFills(2)) << "see " << dir_ << "/serve.log";
  EXPECT_EQ(RunPrint(3), "3\n");
  // Written bytes are not an end: the server keeps serving.
  ASSERT_EQ(write(in[1], "x", 1), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(RunPrint(4), "4\n");

  close(in[1]);
  int wstatus = 0;
  pid_t waited = 0;
  for (auto end = Clock::now() + std::chrono::seconds(30); waited == 0 && Clock::now() < end;) {
    waited = waitpid(pid, &wstatus, WNOHANG);
    if (waited == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(waited, pid) << "codebox serve did not stop within 30 s of its stdin's end";
  children_.clear();
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << wstatus;
  EXPECT_FALSE(base::PathExists(private_dir)) << "--private-dir is removed when the server stops";
  Leftovers after = LeftoversOf(pid, tag);
  EXPECT_TRUE(after.none()) << after.supervisors << " " << after.staging << " " << after.cgroups
                            << " " << after.tmp;
  std::ifstream log(dir_ + "/serve.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_NE(text.str().find("stdin closed"), std::string::npos) << text.str();
}

TEST_F(ServeProcessTest, RefusesUnsafeOrWrongSetups) {
  auto [code, err] = ServeRefuses({"--listen", "0.0.0.0:0"});
  EXPECT_NE(code, 0);
  EXPECT_NE(err.find("--token-file"), std::string::npos)
      << "TCP beyond loopback needs tokens: " << err;

  const std::string tokens = dir_ + "/tokens";
  std::ofstream(tokens) << "# the server's tokens\n\nsecret-0123456789\n";
  chmod(tokens.c_str(), 0644);
  std::tie(code, err) = ServeRefuses({"--listen", "unix:" + socket_, "--token-file", tokens});
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("chmod 600"), std::string::npos) << err;

  std::tie(code, err) = ServeRefuses({"--pool", "python=two"});
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("--pool"), std::string::npos) << err;
  std::tie(code, err) = ServeRefuses({"--max-boxs", "3"});
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("--max-boxs"), std::string::npos) << err;
  std::tie(code, err) = ServeRefuses({"--server", "unix:/x"});
  EXPECT_EQ(code, 2);
  std::tie(code, err) = ServeRefuses({"--log-format", "xml"});
  EXPECT_EQ(code, 2);
  // --private-dir is removed at exit: a directory others may enter is refused.
  const std::string shared = dir_ + "/shared";
  ASSERT_EQ(mkdir(shared.c_str(), 0755), 0);
  std::tie(code, err) = ServeRefuses({"--listen", "unix:" + socket_, "--private-dir", shared});
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("mode 0700"), std::string::npos) << err;
  EXPECT_TRUE(base::PathExists(shared));
  std::tie(code, err) = ServeRefuses({"--private-dir", "relative/dir"});
  EXPECT_EQ(code, 2);
}

}  // namespace
}  // namespace codebox::testing
