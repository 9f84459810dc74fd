// RemoteBox and the CLI against a real `codebox serve` (the codebox binary beside this test,
// on a unix socket in a temp dir): every Box call a client makes, end to end. Skips, with the
// reason, where the binary is missing or the server cannot start a box on this host.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <thread>

#include "base/fs.h"
#include "base/io.h"
#include "base/subprocess.h"
#include "base/unique_fd.h"
#include "codebox/box.h"
#include "remote/server_api.h"
#include "remote/server_choice.h"

namespace codebox {
namespace {

std::string BinDir() {
  char self[PATH_MAX] = {};
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::string path(self, n > 0 ? static_cast<size_t>(n) : 0);
  return path.substr(0, path.find_last_of('/'));
}

// `codebox serve` for the whole suite.
struct Serve {
  std::string dir, address, binary, skip;
  pid_t pid = -1;

  void Start() {
    binary = BinDir() + "/codebox";
    if (::access(binary.c_str(), X_OK) != 0) {
      skip = "the codebox CLI is not built beside this test";
      return;
    }
    dir = *base::MakeTempDir(base::TempRoot(), "codebox-serve-test-");
    address = "unix:" + dir + "/codebox.sock";
    base::UniqueFd log(::open((dir + "/serve.log").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    base::Command command({binary, "serve", "--listen", address, "--pool", "python=1"});
    command.fds = {{log.get(), 2}};
    // What tells a build where its helpers and images are (a sanitizer build runs the release
    // agent in its boxes, as scripts/test says) reaches the server as it reaches this test.
    for (const char* name : {"CODEBOX_AGENT", "CODEBOX_HOME", "ASAN_OPTIONS", "UBSAN_OPTIONS"}) {
      if (const char* value = std::getenv(name)) {
        command.env.push_back(std::string(name) + "=" + value);
      }
    }
    auto spawned = base::Spawn(command);
    if (!spawned.ok()) {
      skip = "cannot start codebox serve: " + spawned.status().ToString();
      return;
    }
    pid = *spawned;
    for (int i = 0; i < 300 && !remote::ServerAnswers(address, std::chrono::seconds(1)); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!remote::ServerAnswers(address, std::chrono::seconds(1))) {
      auto log_text = base::ReadFile(dir + "/serve.log");
      skip = "codebox serve did not answer: " + (log_text.ok() ? *log_text : "");
      return;
    }
    auto probe = Box::Create({.server = address});
    if (!probe.ok()) skip = "the server cannot start a box here: " + probe.status().ToString();
  }

  void Stop() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
    if (!dir.empty()) (void)base::RemoveTree(dir);
  }
};

Serve* serve = nullptr;

class RemoteServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    serve = new Serve;
    serve->Start();
  }
  static void TearDownTestSuite() {
    serve->Stop();
    delete serve;
    serve = nullptr;
  }
  void SetUp() override {
    if (serve->skip.empty()) return;
    // CI builds every image and sets CODEBOX_TESTS_REQUIRE_BOX=1: there nothing may skip.
    const char* require = std::getenv("CODEBOX_TESTS_REQUIRE_BOX");
    if (require != nullptr && std::string(require) == "1") FAIL() << serve->skip;
    GTEST_SKIP() << serve->skip;
  }
  std::unique_ptr<Box> Create() {
    BoxOptions options;
    options.server = serve->address;
    options.exec_timeout = std::chrono::seconds(60);
    auto box = Box::Create(options);
    EXPECT_TRUE(box.ok()) << box.status().ToString();
    return box.ok() ? std::move(*box) : nullptr;
  }
};

TEST_F(RemoteServerTest, ExecRunPythonAndStreaming) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  EXPECT_FALSE(box->info().driver.empty());
  auto r =
      box->Exec({"sh", "-c", "echo $A; cat; exit 3"}, {.env = {{"A", "x"}}, .stdin_data = "in"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "x\nin");
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->driver, box->info().driver);
  std::string streamed;
  ExecOptions options;
  options.on_stdout = [&](std::string_view t) { streamed += t; };
  auto py = box->RunPython("print('a'); print('b')", options);
  ASSERT_TRUE(py.ok()) << py.status().ToString();
  EXPECT_EQ(streamed, "a\nb\n");
  EXPECT_EQ(py->stdout_data, "a\nb\n");
  auto slow = box->Exec({"sleep", "10"}, {.timeout = std::chrono::milliseconds(300)});
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  EXPECT_TRUE(slow->timed_out);
  auto out = box->Run("print(6 * 7)");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "42\n");
}

TEST_F(RemoteServerTest, CellsKeepStateAndInterruptFromAnotherThread) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto first = box->RunCode("x = 21");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  std::vector<std::string> results;
  RunCodeOptions options;
  options.on_result = [&](const CellResult& r) {
    results.push_back(r.Get("text/plain") ? *r.Get("text/plain") : "");
  };
  auto e = box->RunCode("display(1)\nx * 2", options);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->text(), "42");
  EXPECT_EQ(results, (std::vector<std::string>{"1", "42"}));

  std::atomic<bool> started = false;
  RunCodeOptions spin;
  spin.on_stdout = [&](std::string_view) { started = true; };
  std::thread interrupter([&] {
    for (int i = 0; i < 400 && !started; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_TRUE(box->InterruptCode().ok());
  });
  auto spun =
      box->RunCode("import time\nprint('go', flush=True)\nwhile True: time.sleep(0.05)", spin);
  interrupter.join();
  ASSERT_TRUE(spun.ok()) << spun.status().ToString();
  ASSERT_TRUE(spun->error.has_value());
  EXPECT_EQ(spun->error->name, "KeyboardInterrupt");
  EXPECT_EQ(box->RunCode("x")->text(), "21");
  ASSERT_TRUE(box->RestartKernel().ok());
  auto gone = box->RunCode("x");
  ASSERT_TRUE(gone.ok());
  ASSERT_TRUE(gone->error.has_value());
  EXPECT_EQ(gone->error->name, "NameError");
}

TEST_F(RemoteServerTest, FilesAndCopies) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  ASSERT_TRUE(box->WriteFile("d/all.bin", bytes, 0640).ok());
  EXPECT_EQ(*box->ReadFile("d/all.bin"), bytes);
  auto limited = box->ReadFile("d/all.bin", 10);
  EXPECT_EQ(limited.status().code(), StatusCode::kLimitExceeded);
  auto list = box->ListDir("d");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].path, "/work/d/all.bin");
  EXPECT_EQ((*list)[0].size, 256u);
  EXPECT_EQ((*list)[0].mode, 0640u);

  auto host = base::MakeTempDir(base::TempRoot(), "codebox-remote-host-");
  ASSERT_TRUE(host.ok());
  ASSERT_TRUE(base::MakeDirs(*host + "/src/sub").ok());
  ASSERT_TRUE(base::WriteFile(*host + "/src/sub/f", "F").ok());
  ASSERT_TRUE(box->CopyIn(*host + "/src", "in").ok());
  EXPECT_EQ(*box->ReadFile("in/sub/f"), "F");
  ASSERT_TRUE(box->Exec({"sh", "-c", "mkdir -p o/p && echo y > o/p/y"}).ok());
  Status out = box->CopyOut("o", *host + "/back");
  ASSERT_TRUE(out.ok()) << out.ToString();
  EXPECT_EQ(*base::ReadFile(*host + "/back/p/y"), "y\n");
  ASSERT_TRUE(box->CopyOut("o/p/y", *host + "/y.txt").ok());
  EXPECT_EQ(*base::ReadFile(*host + "/y.txt"), "y\n");
  ASSERT_TRUE(box->Remove("d").ok());
  EXPECT_EQ(box->ReadFile("d/all.bin").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(box->Remove("d").code(), StatusCode::kNotFound);
  (void)base::RemoveTree(*host);
  EXPECT_TRUE(box->Destroy().ok());
  EXPECT_FALSE(box->Exec({"true"}).ok());
}

base::RunResult Cli(std::vector<std::string> args, std::vector<std::string> env = {}) {
  base::Command command;
  command.argv = {serve->binary};
  command.argv.insert(command.argv.end(), args.begin(), args.end());
  command.env.insert(command.env.end(), env.begin(), env.end());
  base::RunOptions options;
  options.timeout = std::chrono::seconds(60);
  auto r = base::Run(command, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : base::RunResult{};
}

TEST_F(RemoteServerTest, CliRunExecAndLocal) {
  auto run = Cli({"run", "--server", serve->address, "print(1)"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.out, "1\n");
  auto exec = Cli({"exec", "--", "echo", "hi"}, {"CODEBOX_SERVER=" + serve->address});
  EXPECT_EQ(exec.exit_code, 0);
  EXPECT_EQ(exec.out, "hi\n");
  auto failing = Cli({"run", "--server", serve->address, "raise SystemExit(4)"});
  EXPECT_EQ(failing.exit_code, 4);
  // --local runs here: an image this host lacks is this host's error, whatever the server has.
  auto local = Cli({"run", "--local", "--image", "no-such-image-here", "print(1)"},
                   {"CODEBOX_SERVER=" + serve->address});
  EXPECT_EQ(local.exit_code, 125);
}

// Processes that outlive a request, on a box of a server: through Box (RemoteBox) and
// through the CLI's start, ps, attach and kill.
// What a CLI run said on stderr (its last lines).
std::string Said(const base::RunResult& r) {
  std::string text;
  for (const std::string& line : r.tail) text += line + "\n";
  return text;
}

TEST_F(RemoteServerTest, ProcessesThroughBoxAndCli) {
  auto box = Create();
  ASSERT_TRUE(box);
  ExecOptions background;
  background.background = true;
  background.ring_bytes = 4096;
  auto started = box->Start({"sh", "-c", "echo up; read x; echo \"got $x\"; exit 5"}, background);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  const int pid = (*started)->pid();
  ASSERT_GT(pid, 0);
  auto listed = box->Processes();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  bool running = false;
  for (const ProcessInfo& p : *listed) running |= p.pid == pid && p.running && p.background;
  EXPECT_TRUE(running);
  ASSERT_TRUE(box->SendStdin(pid, "hi\n", /*close=*/true).ok());
  auto result = (*started)->Wait();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->stdout_data, "up\ngot hi\n");
  EXPECT_EQ(result->exit_code, 5);
  EXPECT_EQ(box->KillProcess(pid).code(), StatusCode::kNotFound) << "it has ended";

  // The CLI, on a box the server holds (made here through the API).
  auto api = remote::ServerApi::Open(serve->address, "");
  ASSERT_TRUE(api.ok());
  auto made = api->CallJson("POST", "/v1/boxes", "{}", std::chrono::seconds(60), "create");
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const std::string id = (*made)["id"];
  auto start = Cli(
      {"start", "--server", serve->address, id, "--", "sh", "-c", "echo ready; exec sleep 600"});
  ASSERT_EQ(start.exit_code, 0) << Said(start);
  const std::string cli_pid = start.out.substr(0, start.out.find('\n'));
  auto ps = Cli({"ps", "--server", serve->address, id});
  EXPECT_EQ(ps.exit_code, 0) << Said(ps);
  EXPECT_NE(ps.out.find(cli_pid + " "), std::string::npos) << ps.out;
  EXPECT_NE(ps.out.find("running"), std::string::npos) << ps.out;
  // Killed from another CLI while one attaches: the attacher prints the output and exits as
  // the process did (128 + 9).
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto kill = Cli({"kill", "--server", serve->address, id, cli_pid});
    EXPECT_EQ(kill.exit_code, 0) << Said(kill);
  });
  auto attach = Cli({"attach", "--server", serve->address, id, cli_pid});
  killer.join();
  EXPECT_EQ(attach.out, "ready\n");
  EXPECT_EQ(attach.exit_code, 128 + 9) << Said(attach);
  auto gone = Cli({"kill", "--server", serve->address, id, cli_pid, "--signal", "TERM"});
  EXPECT_EQ(gone.exit_code, 125);
  EXPECT_NE(Said(gone).find("no running process"), std::string::npos) << Said(gone);
  auto usage = Cli({"attach", "--server", serve->address, id, "twelve"});
  EXPECT_EQ(usage.exit_code, 2);
}

}  // namespace
}  // namespace codebox
