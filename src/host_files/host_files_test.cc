#include "host_files/host_files.h"

#include <gtest/gtest.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "base/io.h"

namespace codebox::host_files {
namespace {

std::string FreshDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/host_files_" + name + "_" + std::to_string(::getpid());
  std::system(("rm -rf '" + dir + "'").c_str());
  EXPECT_EQ(::mkdir(dir.c_str(), 0755), 0);
  return dir;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

TEST(HostFilesTest, EntryNames) {
  for (const char* good : {"a", "a b", "résumé.txt", ".hidden", "..."}) {
    EXPECT_TRUE(CheckEntryName(good).ok()) << good;
  }
  EXPECT_TRUE(CheckEntryName(std::string(NAME_MAX, 'n')).ok());
  for (std::string bad :
       {std::string(), std::string("."), std::string(".."), std::string("a/b"), std::string("/"),
        std::string("a\nb"), std::string("a\x1b[2Jb"), std::string("a\tb"), std::string("a\x7f"),
        std::string("a\0b", 3), std::string(NAME_MAX + 1, 'n')}) {
    Status st = CheckEntryName(bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << ShowName(bad);
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\x1b'), std::string::npos) << st.message();
  }
  EXPECT_NE(CheckEntryName("x\ny").message().find("\"x\\ny\""), std::string::npos);
}

TEST(HostFilesTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(17), "17 bytes");
  EXPECT_EQ(HumanBytes(256ull << 20), "256 MiB");
  EXPECT_EQ(HumanBytes(3ull << 30), "3 GiB");
  EXPECT_EQ(HumanBytes((3ull << 30) + (1ull << 29)), "3.5 GiB");
  EXPECT_EQ(HumanBytes(1ull << 50), "1 PiB");
  EXPECT_EQ(HumanBytes(~0ull), "16.0 EiB");
}

// Both ways a file is made: unnamed (O_TMPFILE) and, where unsupported, under a temp name.
class HostFileTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    UseNamedTempFilesForTesting(GetParam());
    old_umask_ = ::umask(022);
  }
  void TearDown() override {
    UseNamedTempFilesForTesting(false);
    ::umask(old_umask_);
  }
  mode_t old_umask_ = 022;
};

TEST_P(HostFileTest, AFileAppearsOnlyWhenCommittedWithoutSpecialBits) {
  std::string dir = FreshDir(GetParam() ? "named" : "unnamed");
  std::vector<MadeEntry> made;
  auto d = HostDir::OpenPath(dir + "/new/parent", &made);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(made.size(), 1u);  // only the outermost directory it made
  auto f = HostFile::Create(*d, "f", 07777);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE(f->Write("hello").ok());
  ASSERT_TRUE(f->Write(std::string(1 << 20, '\0')).ok());
  // Unnamed: nothing there yet; named: only the temp name.
  auto names = base::ListDirectory(dir + "/new/parent");
  if (GetParam()) {
    ASSERT_EQ(names.size(), 1u);
    EXPECT_EQ(names[0].rfind(".codebox-tmp.", 0), 0u) << names[0];
  } else {
    EXPECT_TRUE(names.empty());
  }
  ASSERT_TRUE(f->Commit(&made).ok());
  EXPECT_EQ(base::ListDirectory(dir + "/new/parent").size(), 1u);
  struct stat st;
  ASSERT_EQ(::stat((dir + "/new/parent/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  EXPECT_EQ(st.st_size, 5 + (1 << 20));
  EXPECT_LT(st.st_blocks * 512, 1 << 20) << "the zeros were not left as a hole";

  // Taking it back removes the whole new tree.
  RemoveMade(&made);
  EXPECT_FALSE(Exists(dir + "/new"));
}

TEST_P(HostFileTest, AnAbandonedFileLeavesNothing) {
  std::string dir = FreshDir(GetParam() ? "abandon_named" : "abandon_unnamed");
  std::vector<MadeEntry> made;
  auto d = HostDir::OpenPath(dir, &made);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(made.empty());
  {
    auto f = HostFile::Create(*d, "f", 0644);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->Write("partial").ok());
  }
  EXPECT_TRUE(base::ListDirectory(dir).empty());
}

TEST_P(HostFileTest, HostSymlinksAreNeverWrittenThrough) {
  std::string dir = FreshDir(GetParam() ? "links_named" : "links_unnamed");
  std::string victim = dir + "/victim";
  ASSERT_EQ(::mkdir(victim.c_str(), 0755), 0);
  ASSERT_TRUE(base::WriteFile(victim + "/file", "secret").ok());
  ASSERT_EQ(::mkdir((dir + "/dest").c_str(), 0755), 0);
  ASSERT_EQ(::symlink(victim.c_str(), (dir + "/dest/sub").c_str()), 0);
  ASSERT_EQ(::symlink((victim + "/file").c_str(), (dir + "/dest/f").c_str()), 0);
  std::vector<MadeEntry> made;
  auto d = HostDir::OpenPath(dir + "/dest", &made);
  ASSERT_TRUE(d.ok());

  auto sub = d->OpenChild("sub", 0755, &made);
  ASSERT_FALSE(sub.ok());
  EXPECT_NE(sub.status().message().find("not a directory"), std::string::npos);

  auto f = HostFile::Create(*d, "f", 0644);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->Write("box").ok());
  ASSERT_TRUE(f->Commit(&made).ok());
  EXPECT_EQ(*base::ReadFile(victim + "/file"), "secret");
  EXPECT_EQ(*base::ReadFile(dir + "/dest/f"), "box");
  EXPECT_TRUE(made.empty()) << "a replaced name is not the copy's to remove";

  // A directory in the way of a file is an error, not replaced.
  ASSERT_EQ(::mkdir((dir + "/dest/d").c_str(), 0755), 0);
  auto g = HostFile::Create(*d, "d", 0644);
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->Commit(&made).ok());
  EXPECT_EQ(base::ListDirectory(dir + "/dest").size(), 3u);  // sub, f, d
}

INSTANTIATE_TEST_SUITE_P(Both, HostFileTest, ::testing::Values(false, true));

}  // namespace
}  // namespace codebox::host_files
