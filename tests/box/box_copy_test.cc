// Copy-out attacked from inside a real jail box: whatever box code leaves at the path, the host
// gets only regular files and directories, owned by the caller, without setuid/setgid/sticky
// bits, inside the destination, within the byte limit, with no leftovers, and never waits
// forever.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <set>
#include <thread>

#include "base/io.h"
#include "testing/box_test_util.h"

namespace codebox {
namespace {

using namespace std::chrono_literals;
using testing::CountDirEntries;
using testing::TestBoxOptions;

std::chrono::milliseconds Elapsed(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

// A fresh, empty host directory for one test.
std::string FreshDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/copyout_" + name + "_" + std::to_string(::getpid());
  std::system(("rm -rf '" + dir + "'").c_str());
  EXPECT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir;
  return dir;
}

// Runs a shell script in the box and requires it to succeed.
void Sh(Box& box, const std::string& script) {
  auto r = box.Exec({"sh", "-c", script});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->exit_code, 0) << script << "\n" << r->stderr_data;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

class BoxCopyTest : public ::testing::Test {
 protected:
  void SetUp() override { old_umask_ = ::umask(022); }
  void TearDown() override { ::umask(old_umask_); }
  mode_t old_umask_ = 022;
};

TEST_F(BoxCopyTest, SetuidSetgidAndStickyBitsNeverReachTheHost) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  Sh(*box,
     "cp /bin/sh /work/sh && chmod 7755 /work/sh && "
     "mkdir -p /work/tree/sub && cp /bin/sh /work/tree/sub/sh && chmod 6755 /work/tree/sub/sh && "
     "chmod 3777 /work/tree/sub && stat -c %a /work/sh /work/tree/sub/sh /work/tree/sub");
  std::string dir = FreshDir("setuid");

  ASSERT_TRUE(box->CopyOut("/work/sh", dir + "/sh").ok());
  struct stat st;
  ASSERT_EQ(::stat((dir + "/sh").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0755u) << std::oct << (st.st_mode & 07777);
  EXPECT_EQ(st.st_uid, ::getuid());

  ASSERT_TRUE(box->CopyOut("/work/tree", dir + "/tree").ok());
  ASSERT_EQ(::stat((dir + "/tree/sub/sh").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u) << std::oct << (st.st_mode & 07777);
  ASSERT_EQ(::stat((dir + "/tree/sub").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07000, 0u) << std::oct << (st.st_mode & 07777);
}

TEST_F(BoxCopyTest, FifosSocketsAndSymlinksInATreeAreSkippedNotWritten) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  Sh(*box,
     "mkdir -p /work/t && cd /work/t && echo a > a && mkfifo fifo && "
     "ln -s /etc abs && ln -s /etc/passwd abs_file && ln -s a rel && "
     "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"/work/t/sock\")'");
  std::string dir = FreshDir("special");
  std::set<std::string> skipped;
  CopyOutOptions options;
  options.on_skipped = [&](const std::string& path, const std::string&) { skipped.insert(path); };
  auto start = std::chrono::steady_clock::now();
  Status st = box->CopyOut("/work/t", dir + "/t", options);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_LT(Elapsed(start), 5s);
  EXPECT_EQ(*base::ReadFile(dir + "/t/a"), "a\n");
  for (const char* name : {"fifo", "abs", "abs_file", "rel", "sock"}) {
    EXPECT_FALSE(Exists(dir + "/t/" + name)) << name << " was written to the host";
    EXPECT_EQ(skipped.count(std::string("/work/t/") + name), 1u) << name << " was not reported";
  }
  EXPECT_EQ(CountDirEntries(dir + "/t"), 1);
}

TEST_F(BoxCopyTest, AFifoAtThePathIsAQuickClearError) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  Sh(*box, "mkfifo /work/f && ln -s /work/f /work/link_to_fifo");
  std::string dir = FreshDir("fifo");
  for (const char* path : {"/work/f", "/work/link_to_fifo"}) {
    auto start = std::chrono::steady_clock::now();
    Status st = box->CopyOut(path, dir + "/out/f");
    EXPECT_LT(Elapsed(start), 5s) << path;
    ASSERT_FALSE(st.ok()) << path;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
    EXPECT_TRUE(st.message().find("FIFO") != std::string::npos ||
                st.message().find("symbolic link") != std::string::npos)
        << st.message();
  }
  // Nothing made, not even the missing parent "out".
  EXPECT_EQ(CountDirEntries(dir), 0);
  // The agent is not stuck in an open() of the FIFO.
  auto r = box->Run("print('alive')");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "alive\n");
}

TEST_F(BoxCopyTest, AFifoSwappedInDuringCopyOutHangsNothing) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  Sh(*box, "mkdir -p /work/sw && head -c 262144 /dev/zero | tr '\\0' x > /work/sw/swap");
  std::atomic<bool> swapper_done{false};
  std::thread swapper([&] {
    ExecOptions opts;
    opts.timeout = 12s;
    (void)box->RunPython(
        "import os, time\n"
        "os.chdir('/work/sw')\n"
        "open('/work/swapper-runs', 'w').close()\n"
        "data = b'x' * 262144\n"
        "end = time.time() + 8\n"
        "while time.time() < end:\n"
        "    os.mkfifo('.f')\n"
        "    os.rename('.f', 'swap')\n"
        "    with open('.r', 'wb') as f: f.write(data)\n"
        "    os.rename('.r', 'swap')\n",
        opts);
    swapper_done = true;
  });
  // The copies start once the swapper runs (its python3 may start late on a loaded machine).
  for (auto until = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < until;) {
    auto listing = box->ListDir("/work");
    if (listing.ok() && std::any_of(listing->begin(), listing->end(),
                                    [](const FileEntry& e) { return e.name == "swapper-runs"; })) {
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  std::string dir = FreshDir("swap");
  int copied = 0, refused = 0, skipped = 0;
  CopyOutOptions options;
  options.on_skipped = [&](const std::string&, const std::string&) { ++skipped; };
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 60 && Elapsed(start) < 7s; ++i) {
    auto one = std::chrono::steady_clock::now();
    Status st = i % 2 ? box->CopyOut("/work/sw/swap", dir + "/swap", options)
                      : box->CopyOut("/work/sw", dir + "/sw" + std::to_string(i), options);
    EXPECT_LT(Elapsed(one), 5s) << "copy " << i << " took too long";
    if (st.ok()) {
      ++copied;
    } else {
      ++refused;
      EXPECT_TRUE(st.code() == StatusCode::kInvalidArgument || st.code() == StatusCode::kNotFound)
          << st.ToString();
    }
  }
  swapper.join();
  EXPECT_TRUE(swapper_done);
  EXPECT_GT(copied + refused, 5);
  // The attack really met the copies: FIFOs were found at the path or in the listing.
  EXPECT_GT(refused + skipped, 0) << "copied " << copied;
  std::printf("copied %d, refused %d, skipped %d\n", copied, refused, skipped);
  // Every copy that succeeded wrote a regular file (never a FIFO) or skipped the entry.
  struct stat st;
  if (::lstat((dir + "/swap").c_str(), &st) == 0) {
    EXPECT_TRUE(S_ISREG(st.st_mode));
  }
  EXPECT_EQ(CountDirEntries(dir, ".codebox-tmp"), 0);
  auto r = box->Run("print('alive')");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

TEST_F(BoxCopyTest, ASparseHugeFileIsRefusedQuicklyAndLeavesNothing) {
  BoxOptions options = TestBoxOptions();
  options.disk_mib = 256;
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  Sh(*box,
     "truncate -s 3G /work/big && mkdir -p /work/bigdir && echo small > /work/bigdir/a && "
     "mkdir /work/bigdir/sub && echo small > /work/bigdir/sub/b && "
     "truncate -s 3G /work/bigdir/sub/z_big");
  std::string dir = FreshDir("sparse");

  auto start = std::chrono::steady_clock::now();
  Status st = box->CopyOut("/work/big", dir + "/big");
  EXPECT_LT(Elapsed(start), 5s);
  ASSERT_EQ(st.code(), StatusCode::kLimitExceeded) << st.ToString();
  EXPECT_EQ(st.message(),
            "copy out /work/big: 3 GiB is over the copy-out limit of 256 MiB; pass a larger limit "
            "(CopyOutOptions::max_bytes, --copy-out-limit, copy_out(..., max_bytes=...))");
  EXPECT_EQ(CountDirEntries(dir), 0) << "a file or temp file was left on the host";

  // A directory: the small files copied before the big one are taken back, as are the missing
  // parents the copy made.
  st = box->CopyOut("/work/bigdir", dir + "/new/parent/bigdir");
  ASSERT_EQ(st.code(), StatusCode::kLimitExceeded) << st.ToString();
  EXPECT_NE(st.message().find("/work/bigdir/sub/z_big"), std::string::npos) << st.message();
  EXPECT_EQ(CountDirEntries(dir), 0) << "the failed copy left something behind";

  // Into an existing directory: only what the copy made goes.
  ASSERT_EQ(::mkdir((dir + "/keep").c_str(), 0755), 0);
  ASSERT_TRUE(base::WriteFile(dir + "/keep/mine", "host file").ok());
  st = box->CopyOut("/work/bigdir", dir + "/keep");
  ASSERT_EQ(st.code(), StatusCode::kLimitExceeded) << st.ToString();
  EXPECT_EQ(CountDirEntries(dir + "/keep"), 1);
  EXPECT_EQ(*base::ReadFile(dir + "/keep/mine"), "host file");
}

TEST_F(BoxCopyTest, APetabyteSparseFileIsRefusedToo) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  auto r = box->Exec({"sh", "-c", "truncate -s 1P /work/huge || truncate -s 8T /work/huge"});
  ASSERT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->stderr_data : r.status().ToString());
  std::string dir = FreshDir("petabyte");
  auto start = std::chrono::steady_clock::now();
  Status st = box->CopyOut("/work/huge", dir + "/huge");
  EXPECT_LT(Elapsed(start), 5s);
  EXPECT_EQ(st.code(), StatusCode::kLimitExceeded) << st.ToString();
  EXPECT_EQ(CountDirEntries(dir), 0);
  // The refused download is cancelled in the agent too: it does not stream a petabyte of
  // zeros until the box ends. Its CPU time over one second (ticks of 10 ms) stays small.
  auto cpu = box->Exec({"sh", "-c",
                        "a=$(cut -d' ' -f14,15 /proc/1/stat); sleep 1; "
                        "b=$(cut -d' ' -f14,15 /proc/1/stat); echo $a $b"});
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  long u0 = 0, s0 = 0, u1 = 0, s1 = 0;
  ASSERT_EQ(std::sscanf(cpu->stdout_data.c_str(), "%ld %ld %ld %ld", &u0, &s0, &u1, &s1), 4)
      << cpu->stdout_data;
  EXPECT_LT((u1 + s1) - (u0 + s0), 20) << "the agent is still busy after the refusal";
}

TEST_F(BoxCopyTest, APerCallLimitLetsALargerFileOutWithItsHoles) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());  // 256 MiB disk: the default limit
  Sh(*box, "truncate -s 300M /work/sparse && printf end >> /work/sparse");
  std::string dir = FreshDir("larger");
  Status st = box->CopyOut("/work/sparse", dir + "/sparse");
  ASSERT_EQ(st.code(), StatusCode::kLimitExceeded) << st.ToString();

  // Meanwhile no named temp file may appear: a crash mid-copy would leave nothing.
  std::atomic<bool> copying{true};
  std::atomic<int> strays{0};
  std::thread watcher([&] {
    while (copying) {
      for (const std::string& name : base::ListDirectory(dir)) {
        if (name != "sparse") ++strays;
      }
      std::this_thread::sleep_for(1ms);
    }
  });
  CopyOutOptions larger;
  larger.max_bytes = 512ull << 20;
  st = box->CopyOut("/work/sparse", dir + "/sparse", larger);
  copying = false;
  watcher.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(strays.load(), 0);
  struct stat s;
  ASSERT_EQ(::stat((dir + "/sparse").c_str(), &s), 0);
  EXPECT_EQ(s.st_size, (300 << 20) + 3);
  EXPECT_LT(s.st_blocks * 512, 16 << 20) << "the holes were filled in on the host";
  base::UniqueFd fd(::open((dir + "/sparse").c_str(), O_RDONLY | O_CLOEXEC));
  char tail[3];
  ASSERT_EQ(::pread(fd.get(), tail, 3, 300 << 20), 3);
  EXPECT_EQ(std::string(tail, 3), "end");

  // A smaller per-call limit holds too, and so does the box's own disk size as the default.
  CopyOutOptions small;
  small.max_bytes = 1 << 20;
  st = box->CopyOut("/work/sparse", dir + "/small", small);
  EXPECT_EQ(st.code(), StatusCode::kLimitExceeded);
  EXPECT_NE(st.message().find("limit of 1 MiB"), std::string::npos) << st.message();
  EXPECT_FALSE(Exists(dir + "/small"));
}

TEST_F(BoxCopyTest, NewlineAndOverlongNamesAreClearErrors) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  auto r = box->RunPython(
      "import os\n"
      "os.makedirs('/work/nl')\n"
      "open('/work/nl/ok', 'w').write('ok')\n"
      "open('/work/nl/bad\\nname\\x1b[31m', 'w').write('x')\n"
      "os.makedirs('/work/deep')\n"
      "os.chdir('/work/deep')\n"
      "for i in range(20):\n"
      "    os.mkdir('d' * 250)\n"
      "    os.chdir('d' * 250)\n"
      "open('leaf', 'w').write('x')\n"
      "os.makedirs('/work/longname')\n"
      "open('/work/longname/' + 'n' * 255, 'w').write('fine')\n");
  ASSERT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->stderr_data : r.status().ToString());
  std::string dir = FreshDir("names");

  Status st = box->CopyOut("/work/nl", dir + "/nl");
  ASSERT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("bad\\nname"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("newline"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << "raw newline in: " << st.message();
  EXPECT_EQ(st.message().find('\x1b'), std::string::npos) << "raw escape in the message";
  EXPECT_EQ(CountDirEntries(dir), 0);

  st = box->CopyOut("/work/deep", dir + "/deep");
  ASSERT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("PATH_MAX"), std::string::npos) << st.message();
  EXPECT_EQ(CountDirEntries(dir), 0);

  // NAME_MAX itself is fine.
  st = box->CopyOut("/work/longname", dir + "/longname");
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(*base::ReadFile(dir + "/longname/" + std::string(255, 'n')), "fine");
}

TEST_F(BoxCopyTest, MissingHostParentDirectoriesAreMade) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  Sh(*box, "echo hi > /work/f.txt && mkdir -p /work/d/e && echo there > /work/d/e/g.txt");
  std::string dir = FreshDir("parents");
  Status st = box->CopyOut("f.txt", dir + "/a/b/c/f.txt");
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(*base::ReadFile(dir + "/a/b/c/f.txt"), "hi\n");
  st = box->CopyOut("/work/d", dir + "/x/y/d");
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(*base::ReadFile(dir + "/x/y/d/e/g.txt"), "there\n");
  struct stat s;
  ASSERT_EQ(::stat((dir + "/a/b").c_str(), &s), 0);
  EXPECT_EQ(s.st_mode & 07777, 0755u);
}

TEST_F(BoxCopyTest, PlantedSymlinksCannotMakeTheHostWriteOutsideTheDestination) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  Sh(*box,
     "mkdir -p /work/t/out2 && ln -s /etc /work/t/out && echo evil > /work/t/out2/passwd && "
     "mkdir -p /work/u/out && echo evil > /work/u/out/passwd && "
     "mkdir -p /work/v && echo box > /work/v/f");
  std::string dir = FreshDir("symlink");
  std::string victim = dir + "/victim";
  ASSERT_EQ(::mkdir(victim.c_str(), 0755), 0);
  ASSERT_TRUE(base::WriteFile(victim + "/file", "host secret").ok());

  // A symlink in the box is not recreated on the host.
  Status st = box->CopyOut("/work/t", dir + "/t");
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(Exists(dir + "/t/out"));
  EXPECT_EQ(*base::ReadFile(dir + "/t/out2/passwd"), "evil\n");

  // A host symlink named like a box directory is never written through.
  ASSERT_EQ(::mkdir((dir + "/u").c_str(), 0755), 0);
  ASSERT_EQ(::symlink(victim.c_str(), (dir + "/u/out").c_str()), 0);
  st = box->CopyOut("/work/u", dir + "/u");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not a directory"), std::string::npos) << st.message();
  EXPECT_FALSE(Exists(victim + "/passwd")) << "the copy wrote through a host symlink";

  // A host symlink named like a box file is replaced, not followed.
  ASSERT_EQ(::mkdir((dir + "/v").c_str(), 0755), 0);
  ASSERT_EQ(::symlink((victim + "/file").c_str(), (dir + "/v/f").c_str()), 0);
  st = box->CopyOut("/work/v", dir + "/v");
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(*base::ReadFile(victim + "/file"), "host secret");
  struct stat s;
  ASSERT_EQ(::lstat((dir + "/v/f").c_str(), &s), 0);
  EXPECT_TRUE(S_ISREG(s.st_mode));
  EXPECT_EQ(*base::ReadFile(dir + "/v/f"), "box\n");
  EXPECT_EQ(CountDirEntries(victim), 1);
}

// The same defences under the vm driver (QEMU tcg here: slow, so one boot for all of it).
TEST_F(BoxCopyTest, VmSetuidFifoAndLimitAreHandledTheSame) {
  BoxOptions options = TestBoxOptions();
  options.driver = DriverKind::kVm;
  options.allow_emulation = true;
  options.exec_timeout = std::chrono::seconds(60);
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  Sh(*box,
     "cp /bin/sh /work/sh && chmod 6755 /work/sh && mkfifo /work/f && "
     "truncate -s 3G /work/big");
  std::string dir = FreshDir("vm");
  Status st = box->CopyOut("/work/sh", dir + "/sh");
  ASSERT_TRUE(st.ok()) << st.ToString();
  struct stat s;
  ASSERT_EQ(::stat((dir + "/sh").c_str(), &s), 0);
  EXPECT_EQ(s.st_mode & 07777, 0755u) << std::oct << (s.st_mode & 07777);

  auto start = std::chrono::steady_clock::now();
  st = box->CopyOut("/work/f", dir + "/f");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  st = box->CopyOut("/work/big", dir + "/big");
  EXPECT_EQ(st.code(), StatusCode::kLimitExceeded) << st.ToString();
  EXPECT_LT(Elapsed(start), 20s);
  EXPECT_EQ(CountDirEntries(dir), 1);
}

}  // namespace
}  // namespace codebox
