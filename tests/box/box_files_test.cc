// Box's in-memory file calls against a real jail box: binary-safe round trips (also of a file
// of several MiB), listing, removal of files and trees (a symlink to outside the tree is
// removed, not followed), errors for missing paths (each context said once), and the read cap.
#include <algorithm>
#include <map>
#include <random>

#include "testing/box_test_util.h"

namespace codebox {
namespace {

using testing::TestBoxOptions;

// Runs a shell script in the box; returns its stdout, failing the test unless it exits 0.
std::string Sh(Box& box, const std::string& script) {
  auto r = box.Exec({"sh", "-c", script});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return "";
  EXPECT_EQ(r->exit_code, 0) << script << "\n" << r->stderr_data;
  return r->stdout_data;
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::string data(n, '\0');
  for (char& c : data) c = static_cast<char>(gen() & 0xff);
  return data;
}

TEST(BoxFilesTest, EveryByteValueRoundTripsAndBoxCodeSeesTheSameBytes) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  ASSERT_TRUE(box->WriteFile("bytes.bin", all).ok());
  // What box code reads is what was written: every value in order.
  EXPECT_EQ(Sh(*box,
               "python3 -c \"d=open('bytes.bin','rb').read(); "
               "print(len(d), d == bytes(range(256)))\""),
            "256 True\n");
  auto back = box->ReadFile("/work/bytes.bin");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, all);
  // And what box code writes comes back byte for byte.
  Sh(*box, "python3 -c \"open('rev.bin','wb').write(bytes(range(255, -1, -1)))\"");
  auto rev = box->ReadFile("rev.bin");
  ASSERT_TRUE(rev.ok()) << rev.status().ToString();
  std::string expected(all.rbegin(), all.rend());
  EXPECT_EQ(*rev, expected);
}

TEST(BoxFilesTest, AFileOfSeveralMiBRoundTrips) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  const std::string data = RandomBytes((5u << 20) + 123, 11);  // many frames, odd tail
  ASSERT_TRUE(box->WriteFile("deep/er/big.bin", data, 0600).ok());
  EXPECT_EQ(Sh(*box, "stat -c '%s %a' deep/er/big.bin"), std::to_string(data.size()) + " 600\n");
  auto back = box->ReadFile("deep/er/big.bin");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->size(), data.size());
  EXPECT_TRUE(*back == data) << "content differs";
}

TEST(BoxFilesTest, ListDirShowsWhatBoxCodeMade) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  Sh(*box,
     "mkdir -p out/sub && printf 12345 > out/five && chmod 0640 out/five && "
     "ln -s /etc/passwd out/link && mkfifo out/pipe");
  auto entries = box->ListDir("out");
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  std::map<std::string, FileEntry> by_name;
  for (const FileEntry& e : *entries) by_name[e.name] = e;
  ASSERT_EQ(by_name.size(), 4u);
  EXPECT_EQ(by_name["five"].type, "file");
  EXPECT_EQ(by_name["five"].size, 5u);
  EXPECT_EQ(by_name["five"].mode, 0640u);
  EXPECT_EQ(by_name["five"].path, "/work/out/five");
  EXPECT_EQ(by_name["sub"].type, "dir");
  EXPECT_EQ(by_name["link"].type, "symlink");
  EXPECT_EQ(by_name["pipe"].type, "other");
  auto root = box->ListDir("/");
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_TRUE(std::any_of(root->begin(), root->end(),
                          [](const FileEntry& e) { return e.path == "/work" && e.type == "dir"; }));
}

TEST(BoxFilesTest, RemoveAFileAndATreeButNeverWhatASymlinkPointsAt) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  Sh(*box,
     "mkdir -p /tmp/outside/sub && echo keep > /tmp/outside/keep && "
     "echo keep > /tmp/outside/sub/keep && "
     "mkdir -p tree/a/b && echo x > tree/a/b/x && echo f > single && "
     "ln -s /tmp/outside tree/a/escape && ln -s /tmp/outside/keep tree/file-link");
  ASSERT_TRUE(box->Remove("single").ok());
  ASSERT_TRUE(box->Remove("tree").ok());
  EXPECT_EQ(Sh(*box, "ls -A /work; cat /tmp/outside/keep /tmp/outside/sub/keep"), "keep\nkeep\n");
  // A symlink given as the path is removed itself.
  Sh(*box, "ln -s /tmp/outside top-link");
  ASSERT_TRUE(box->Remove("top-link").ok());
  EXPECT_EQ(Sh(*box, "ls -A /work; ls /tmp/outside"), "keep\nsub\n");
}

TEST(BoxFilesTest, MissingPathsAreNotFoundAndTheRootIsRefused) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  Status rm = box->Remove("nothing-here");
  EXPECT_EQ(rm.code(), StatusCode::kNotFound) << rm.ToString();
  EXPECT_NE(rm.message().find("/work/nothing-here"), std::string::npos) << rm.ToString();
  auto read = box->ReadFile("nothing-here");
  EXPECT_EQ(read.status().code(), StatusCode::kNotFound) << read.status().ToString();
  auto list = box->ListDir("no/such/dir");
  EXPECT_EQ(list.status().code(), StatusCode::kNotFound) << list.status().ToString();
  EXPECT_EQ(box->Remove("/").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(box->Remove(".").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Sh(*box, "test -d /work && echo yes"), "yes\n");
}

// The client, the box and the agent each name what failed; the user reads it once.
TEST(BoxFilesTest, FileErrorsSayWhatFailedOnce) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  EXPECT_EQ(box->WriteFile("/usr/x", "data").message(), "write /usr/x: Read-only file system");
  EXPECT_EQ(box->WriteFile("/usr/new/x", "data").message(),
            "write /usr/new/x: mkdir /usr/new: Read-only file system");
  EXPECT_EQ(box->ReadFile("nothing-here").status().message(),
            "read /work/nothing-here: No such file or directory");
  EXPECT_EQ(box->ListDir("/no-such-dir").status().message(),
            "list /no-such-dir: No such file or directory");
}

TEST(BoxFilesTest, ReadFileOverItsCapIsLimitExceeded) {
  BoxOptions options = TestBoxOptions();
  options.disk_mib = 16;
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  ASSERT_TRUE(box->WriteFile("k.bin", std::string(4096, 'k')).ok());
  auto capped = box->ReadFile("k.bin", 4095);
  EXPECT_EQ(capped.status().code(), StatusCode::kLimitExceeded) << capped.status().ToString();
  auto fits = box->ReadFile("k.bin", 4096);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  // The default cap is the disk size: a sparse file that claims more is refused before any data.
  Sh(*box, "truncate -s 17M sparse");
  auto sparse = box->ReadFile("sparse");
  EXPECT_EQ(sparse.status().code(), StatusCode::kLimitExceeded) << sparse.status().ToString();
  // The box still answers afterwards.
  EXPECT_EQ(Sh(*box, "echo alive"), "alive\n");
}

}  // namespace
}  // namespace codebox
