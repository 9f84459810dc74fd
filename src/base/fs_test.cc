#include "base/fs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/io.h"

namespace codebox::base {
namespace {

class FsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = MakeTempDir("/tmp", "base_fs_test_");
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    root_ = *dir;
    tree_ = root_ + "/tree";
    outside_ = root_ + "/outside";
    ASSERT_TRUE(MakeDirs(tree_ + "/a/b").ok());
    ASSERT_TRUE(MakeDirs(outside_).ok());
    ASSERT_TRUE(WriteFile(outside_ + "/keep", "precious").ok());
  }
  void TearDown() override {
    for (auto m = mounts_.rbegin(); m != mounts_.rend(); ++m) ::umount2(m->c_str(), MNT_DETACH);
    EXPECT_TRUE(RemoveTree(root_).ok());
  }
  // Mounts a tmpfs (or binds `source`) on `target`; false (the test skips) without the right.
  // The first call makes root_ a private mount, so that nothing propagates to or from /tmp.
  bool Mount(const std::string& target, const std::string& source = "") {
    if (mounts_.empty()) {
      if (::mount(root_.c_str(), root_.c_str(), nullptr, MS_BIND, nullptr) != 0) {
        return Cannot(root_);
      }
      mounts_.push_back(root_);
      if (::mount(nullptr, root_.c_str(), nullptr, MS_PRIVATE, nullptr) != 0) return Cannot(root_);
    }
    int rc = source.empty() ? ::mount("tmpfs", target.c_str(), "tmpfs", 0, "size=1m")
                            : ::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr);
    if (rc != 0) return Cannot(target);
    mounts_.push_back(target);
    return true;
  }
  bool Cannot(const std::string& target) {
    skip_reason_ = "mount on " + target + ": " + std::strerror(errno) +
                   " (the mount tests need root or CAP_SYS_ADMIN)";
    return false;
  }

  std::string root_, tree_, outside_, skip_reason_;
  std::vector<std::string> mounts_;
};

TEST_F(FsTest, MakeDirsCreatesParentsWithTheModeAndRefusesAnEmptyPath) {
  ASSERT_TRUE(MakeDirs(root_ + "/x/y/z", 0700).ok());
  struct stat st;
  ASSERT_EQ(::stat((root_ + "/x/y").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(MakeDirs(root_ + "/x/y/z").ok()) << "existing dirs are fine";
  EXPECT_EQ(MakeDirs("").code(), StatusCode::kInvalidArgument);
}

TEST_F(FsTest, RemoveTreeRemovesLinksNotWhatTheyPointAt) {
  ASSERT_EQ(::symlink(outside_.c_str(), (tree_ + "/a/to-dir").c_str()), 0);
  ASSERT_EQ(::symlink((outside_ + "/keep").c_str(), (tree_ + "/a/b/to-file").c_str()), 0);
  ASSERT_EQ(::symlink("/nonexistent", (tree_ + "/dangling").c_str()), 0);
  ASSERT_TRUE(WriteFile(tree_ + "/a/b/file", "x").ok());
  ASSERT_TRUE(RemoveTree(tree_).ok());
  EXPECT_FALSE(PathExists(tree_));
  auto kept = ReadFile(outside_ + "/keep");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, "precious");

  // A symlink given as the tree itself goes, its target stays.
  ASSERT_EQ(::symlink(outside_.c_str(), (root_ + "/link").c_str()), 0);
  ASSERT_TRUE(RemoveTree(root_ + "/link").ok());
  EXPECT_FALSE(PathExists(root_ + "/link"));
  EXPECT_TRUE(PathExists(outside_ + "/keep"));
}

TEST_F(FsTest, RemoveTreeOfAMissingPathIsOk) {
  EXPECT_TRUE(RemoveTree(root_ + "/missing").ok());
  EXPECT_TRUE(RemoveTreeAndMounts(root_ + "/missing").ok());
}

TEST_F(FsTest, RemoveTreeRefusesMountsBelowAndLeavesTheirContents) {
  ASSERT_TRUE(MakeDirs(tree_ + "/a/tmp").ok());
  if (!Mount(tree_ + "/a/tmp")) GTEST_SKIP() << skip_reason_;
  ASSERT_TRUE(WriteFile(tree_ + "/a/tmp/inside", "mounted").ok());
  // A bind mount of the same filesystem has the same st_dev: it must be seen all the same.
  ASSERT_TRUE(MakeDirs(tree_ + "/bind").ok());
  ASSERT_TRUE(Mount(tree_ + "/bind", outside_)) << skip_reason_;
  ASSERT_TRUE(WriteFile(tree_ + "/a/b/file", "x").ok());

  Status st = RemoveTree(tree_);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("mount point"), std::string::npos) << st.message();
  EXPECT_FALSE(PathExists(tree_ + "/a/b")) << "what is not a mount still goes";
  EXPECT_TRUE(PathExists(tree_ + "/a/tmp/inside"));
  EXPECT_TRUE(PathExists(outside_ + "/keep"));
  EXPECT_TRUE(PathExists(tree_ + "/bind/keep"));

  // The tree being a mount point itself: refused before anything is touched.
  Status top = RemoveTree(tree_ + "/a/tmp");
  EXPECT_FALSE(top.ok());
  EXPECT_TRUE(PathExists(tree_ + "/a/tmp/inside"));
}

TEST_F(FsTest, RemoveTreeAndMountsDetachesThemFirst) {
  ASSERT_TRUE(MakeDirs(tree_ + "/proc").ok());
  if (!Mount(tree_ + "/proc")) GTEST_SKIP() << skip_reason_;
  ASSERT_TRUE(MakeDirs(tree_ + "/a/bind").ok());
  ASSERT_TRUE(Mount(tree_ + "/a/bind", outside_)) << skip_reason_;
  ASSERT_TRUE(MakeDirs(tree_ + "/a/bind/nested").ok());  // in outside_, seen through the bind
  ASSERT_TRUE(Mount(tree_ + "/a/bind/nested")) << skip_reason_;

  Status st = RemoveTreeAndMounts(tree_);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(PathExists(tree_));
  auto kept = ReadFile(outside_ + "/keep");
  ASSERT_TRUE(kept.ok()) << "the bind mount's source was walked into";
  EXPECT_EQ(*kept, "precious");
  EXPECT_TRUE(PathExists(outside_ + "/nested"));
}

TEST_F(FsTest, PathExistsCountsADanglingSymlink) {
  EXPECT_TRUE(PathExists(tree_ + "/a"));
  EXPECT_FALSE(PathExists(tree_ + "/nothing"));
  ASSERT_EQ(::symlink("/nonexistent", (tree_ + "/dangling").c_str()), 0);
  EXPECT_TRUE(PathExists(tree_ + "/dangling"));
}

TEST_F(FsTest, MakeTempDirIsFreshPrivateAndMakesItsParent) {
  auto a = MakeTempDir(root_ + "/new/parent", "t-");
  auto b = MakeTempDir(root_ + "/new/parent", "t-");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_TRUE(a->starts_with(root_ + "/new/parent/t-"));
  struct stat st;
  ASSERT_EQ(::stat(a->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(FsTest, TreeSizeCountsHardLinksOnceAndFollowsNoLinks) {
  ASSERT_TRUE(WriteFile(tree_ + "/a/f", std::string(1000, 'x')).ok());
  ASSERT_EQ(::link((tree_ + "/a/f").c_str(), (tree_ + "/a/b/hard").c_str()), 0);
  ASSERT_TRUE(WriteFile(outside_ + "/big", std::string(100000, 'y')).ok());
  std::string target = outside_;  // the symlink's own size is its target's length
  ASSERT_EQ(::symlink(target.c_str(), (tree_ + "/out").c_str()), 0);
  EXPECT_EQ(TreeSize(tree_), 1000 + target.size());
  EXPECT_EQ(TreeSize(root_ + "/missing"), 0u);
}

}  // namespace
}  // namespace codebox::base
