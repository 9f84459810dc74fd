// Tar round trips and hostile archives, made here with libarchive's writer.
#include "http/tar.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "base/fs.h"

namespace codebox::http {
namespace {

struct TarEntry {
  TarEntry(std::string p, unsigned t, std::string c, mode_t m = 0644, std::string l = "")
      : path(std::move(p)), type(t), content(std::move(c)), mode(m), link(std::move(l)) {}
  std::string path;
  unsigned type;
  std::string content;
  mode_t mode;
  std::string link;  // symlink target
};

std::string MakeTar(const std::vector<TarEntry>& entries) {
  std::string out;
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_open(
      a, &out, nullptr,
      [](archive*, void* o, const void* b, size_t n) -> la_ssize_t {
        static_cast<std::string*>(o)->append(static_cast<const char*>(b), n);
        return static_cast<la_ssize_t>(n);
      },
      nullptr);
  for (const TarEntry& t : entries) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, t.path.c_str());
    archive_entry_set_filetype(e, t.type);
    archive_entry_set_perm(e, t.mode);
    if (t.type == AE_IFLNK) archive_entry_set_symlink(e, t.link.c_str());
    if (t.type == AE_IFCHR) archive_entry_set_rdev(e, makedev(1, 3));
    archive_entry_set_size(e, t.type == AE_IFREG ? t.content.size() : 0);
    EXPECT_EQ(archive_write_header(a, e), ARCHIVE_OK) << archive_error_string(a);
    if (t.type == AE_IFREG) archive_write_data(a, t.content.data(), t.content.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& content, mode_t mode = 0644) {
  std::ofstream(path, std::ios::binary) << content;
  chmod(path.c_str(), mode);
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode;
}

// Names under `dir`, recursively, "" when empty.
std::string Listing(const std::string& dir) {
  std::string out;
  std::string cmd = "cd '" + dir + "' && find . -mindepth 1 | sort";
  FILE* f = popen(cmd.c_str(), "r");
  char buf[512];
  while (f && fgets(buf, sizeof buf, f)) out += buf;
  if (f) pclose(f);
  return out;
}

class TarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = base::MakeTempDir(base::TempRoot(), "codebox-tar-test-");
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    root_ = *d;
    ASSERT_TRUE(base::MakeDirs(root_ + "/in").ok());
    ASSERT_TRUE(base::MakeDirs(root_ + "/out").ok());
    ASSERT_TRUE(base::MakeDirs(root_ + "/outside").ok());
  }
  void TearDown() override { (void)base::RemoveTree(root_); }

  Status Untar(const std::vector<TarEntry>& entries, UntarLimits limits = {}) {
    return UntarInto(MakeTar(entries), root_ + "/out", limits);
  }

  std::string root_;
};

TEST_F(TarTest, RoundTripKeepsFilesDirsAndModesAndSkipsSymlinks) {
  std::string in = root_ + "/in";
  std::string binary(
      "\0\x01\xff"
      "abc\n",
      7);
  WriteFile(in + "/a.txt", "hello");
  WriteFile(in + "/run.sh", "#!/bin/sh\n", 0755);
  ASSERT_TRUE(base::MakeDirs(in + "/sub/deeper").ok());
  WriteFile(in + "/sub/deeper/data.bin", binary);
  WriteFile(in + "/sub/empty", "");
  ASSERT_EQ(symlink("/etc/passwd", (in + "/link").c_str()), 0);

  auto tar = TarDirectory(in, 1 << 20);
  ASSERT_TRUE(tar.ok()) << tar.status().ToString();
  std::string out = root_ + "/out";
  Status st = UntarInto(*tar, out, {});
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Listing(out),
            "./a.txt\n./run.sh\n./sub\n./sub/deeper\n./sub/deeper/data.bin\n./sub/empty\n");
  EXPECT_EQ(ReadFile(out + "/a.txt"), "hello");
  EXPECT_EQ(ReadFile(out + "/sub/deeper/data.bin"), binary);
  EXPECT_EQ(ModeOf(out + "/run.sh") & 07777, 0755u);
  EXPECT_EQ(ModeOf(out + "/a.txt") & 07777, 0644u);

  auto small = TarDirectory(in, 1024);
  EXPECT_EQ(small.status().code(), StatusCode::kLimitExceeded) << small.status().ToString();
}

TEST_F(TarTest, EmptyDirectoryRoundTrips) {
  auto tar = TarDirectory(root_ + "/in", 1 << 20);
  ASSERT_TRUE(tar.ok()) << tar.status().ToString();
  EXPECT_TRUE(UntarInto(*tar, root_ + "/out", {}).ok());
  EXPECT_EQ(Listing(root_ + "/out"), "");
}

TEST_F(TarTest, RefusesDotDotAndAbsolutePaths) {
  for (const char* bad : {"../x", "a/../../x", "ok/../../outside/x", "/abs/x", "/x"}) {
    Status st = Untar({{"fine.txt", AE_IFREG, "1"}, {bad, AE_IFREG, "evil"}});
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad << ": " << st.ToString();
    EXPECT_NE(st.message().find(bad), std::string::npos) << st.message();
    EXPECT_EQ(Listing(root_ + "/out"), "") << bad << ": a failed untar left files";
    EXPECT_EQ(Listing(root_ + "/outside"), "");
  }
  EXPECT_FALSE(base::PathExists(root_ + "/x"));
  EXPECT_FALSE(base::PathExists("/abs/x"));
}

TEST_F(TarTest, NeverWritesThroughASymlink) {
  Status st = Untar({{"link", AE_IFLNK, "", 0777, root_ + "/outside"},
                     {"link/x", AE_IFREG, "evil"},
                     {"dirlink", AE_IFLNK, "", 0777, "../outside"},
                     {"dirlink/y", AE_IFREG, "evil"}});
  // The links are dropped; what would have gone through them lands in real directories.
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Listing(root_ + "/outside"), "");
  EXPECT_FALSE(S_ISLNK(ModeOf(root_ + "/out/link")));
  EXPECT_EQ(Listing(root_ + "/out"), "./dirlink\n./dirlink/y\n./link\n./link/x\n");
}

TEST_F(TarTest, DropsDeviceNodesAndStripsSetuid) {
  Status st = Untar({{"null", AE_IFCHR, "", 0666},
                     {"fifo", AE_IFIFO, "", 0666},
                     {"suid", AE_IFREG, "x", 06755},
                     {"sticky", AE_IFDIR, "", 01777}});
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Listing(root_ + "/out"), "./sticky\n./suid\n");
  EXPECT_EQ(ModeOf(root_ + "/out/suid") & 07777, 0755u);
  EXPECT_EQ(ModeOf(root_ + "/out/sticky") & 07777, 0777u);
}

TEST_F(TarTest, CapsEntriesAndBytesAndCleansUp) {
  std::vector<TarEntry> many;
  for (int i = 0; i < 20; ++i) many.push_back({"d/f" + std::to_string(i), AE_IFREG, "x"});
  UntarLimits few;
  few.max_entries = 10;
  Status st = Untar(many, few);
  EXPECT_EQ(st.code(), StatusCode::kLimitExceeded) << st.ToString();
  EXPECT_EQ(Listing(root_ + "/out"), "");

  UntarLimits small;
  small.max_bytes = 1000;
  st = Untar({{"a", AE_IFREG, std::string(600, 'a')}, {"b", AE_IFREG, std::string(600, 'b')}},
             small);
  EXPECT_EQ(st.code(), StatusCode::kLimitExceeded) << st.ToString();
  EXPECT_EQ(Listing(root_ + "/out"), "");
}

TEST_F(TarTest, RefusesGarbage) {
  Status st = UntarInto(std::string(2048, 'x'), root_ + "/out", {});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  std::string tar = MakeTar({{"big", AE_IFREG, std::string(100000, 'z')}});
  st = UntarInto(std::string_view(tar).substr(0, 5000), root_ + "/out", {});
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(Listing(root_ + "/out"), "");
}

}  // namespace
}  // namespace codebox::http
