// Box's in-memory file calls (WriteFile, ReadFile, ListDir, Remove) through the BoxEnv seam:
// the real agent code in a child of the test, working on a temporary directory of the host.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "seam_fixture.h"

namespace codebox::testing {
namespace {

namespace fs = std::filesystem;

std::string AllByteValues(size_t repeat) {
  std::string data;
  for (size_t r = 0; r < repeat; ++r) {
    for (int b = 0; b < 256; ++b) data.push_back(static_cast<char>(b));
  }
  return data;
}

TEST_F(SeamTest, WriteThenReadIsBinarySafeAndRelativeToTheWorkdir) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  const std::string data = AllByteValues(3);
  ASSERT_TRUE(box->WriteFile("sub/dir/bytes.bin", data, 0600).ok());
  EXPECT_TRUE(fs::is_regular_file(options_.workdir + "/sub/dir/bytes.bin")) << "parents made";
  struct stat st;
  ASSERT_EQ(::stat((options_.workdir + "/sub/dir/bytes.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  auto back = box->ReadFile("sub/dir/bytes.bin");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, data);
  auto absolute = box->ReadFile(options_.workdir + "/sub/dir/bytes.bin");
  ASSERT_TRUE(absolute.ok());
  EXPECT_EQ(*absolute, data);
  ASSERT_TRUE(box->WriteFile("empty", "").ok());
  auto empty = box->ReadFile("empty");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, "");
}

TEST_F(SeamTest, ReadFileOverItsCapIsLimitExceeded) {
  options_.disk_mib = 1;  // the default cap: the box's disk size
  auto box = Create();
  ASSERT_NE(box, nullptr);
  ASSERT_TRUE(box->WriteFile("big", std::string((1u << 20) + 1, 'x')).ok());
  auto over_default = box->ReadFile("big");
  EXPECT_EQ(over_default.status().code(), StatusCode::kLimitExceeded)
      << over_default.status().ToString();
  auto over = box->ReadFile("big", 100);
  EXPECT_EQ(over.status().code(), StatusCode::kLimitExceeded) << over.status().ToString();
  EXPECT_NE(over.status().message().find("over the limit of 100"), std::string::npos)
      << over.status().ToString();
  auto fits = box->ReadFile("big", (1u << 20) + 1);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_EQ(fits->size(), (1u << 20) + 1);
}

TEST_F(SeamTest, ListDirNamesEntriesWithTheirPaths) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  ASSERT_TRUE(box->WriteFile("a.csv", "x,y\n1,2\n", 0640).ok());
  ASSERT_TRUE(box->WriteFile("d/inner.txt", "i").ok());
  fs::create_symlink("/etc/passwd", options_.workdir + "/link");
  for (const std::string& asked : {std::string("."), std::string("./"), options_.workdir}) {
    auto entries = box->ListDir(asked);
    ASSERT_TRUE(entries.ok()) << asked << ": " << entries.status().ToString();
    std::map<std::string, FileEntry> by_name;
    for (const FileEntry& e : *entries) by_name[e.name] = e;
    ASSERT_EQ(by_name.size(), 3u) << asked;
    EXPECT_EQ(by_name["a.csv"].type, "file");
    EXPECT_EQ(by_name["a.csv"].size, 8u);
    EXPECT_EQ(by_name["a.csv"].mode, 0640u);
    EXPECT_EQ(by_name["a.csv"].path, options_.workdir + "/a.csv") << asked;
    EXPECT_EQ(by_name["d"].type, "dir");
    EXPECT_EQ(by_name["link"].type, "symlink");
  }
  auto inner = box->ListDir("d");
  ASSERT_TRUE(inner.ok());
  ASSERT_EQ(inner->size(), 1u);
  EXPECT_EQ((*inner)[0].path, options_.workdir + "/d/inner.txt");
  EXPECT_EQ(box->ListDir("missing").status().code(), StatusCode::kNotFound);
}

// A hostile agent names an entry so that its path would leave the directory listed (a
// program might join it to a host directory next): the listing fails, naming the entry.
TEST_F(SeamTest, ListDirRefusesNamesThatLeaveTheDirectory) {
  for (std::string bad : {"..", "../../etc/passwd", "a/b", ".", ""}) {
    env_.tamper = [bad](Direction dir, protocol::Frame& f) {
      if (dir == Direction::kToHost && EventOf(f) == "entries") {
        EditControl(f, [&](protocol::Json& j) { j["entries"][0]["name"] = bad; });
      }
      return Verdict::kForward;
    };
    auto box = Create();
    ASSERT_NE(box, nullptr);
    ASSERT_TRUE(box->WriteFile("a.csv", "x").ok());
    auto entries = box->ListDir(".");
    EXPECT_EQ(entries.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(entries.status().message().find("entry \"" + bad), std::string::npos)
        << entries.status().ToString();
  }
}

TEST_F(SeamTest, RemoveAFileATreeAndNotASymlinksTarget) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  const std::string outside = tmp_ + "/outside";
  fs::create_directories(outside);
  { std::ofstream(outside + "/keep") << "keep"; }
  ASSERT_TRUE(box->WriteFile("f", "1").ok());
  ASSERT_TRUE(box->WriteFile("tree/a/b/c.txt", "c").ok());
  fs::create_directory_symlink(outside, options_.workdir + "/tree/a/escape");
  ASSERT_TRUE(box->Remove("f").ok());
  EXPECT_FALSE(fs::exists(options_.workdir + "/f"));
  ASSERT_TRUE(box->Remove("tree").ok());
  EXPECT_FALSE(fs::exists(options_.workdir + "/tree"));
  EXPECT_TRUE(fs::exists(outside + "/keep")) << "the symlink was removed, not followed";
  Status missing = box->Remove("tree");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound) << missing.ToString();
  EXPECT_EQ(box->Remove(".").code(), StatusCode::kInvalidArgument) << "the workdir stays";
  EXPECT_EQ(box->Remove("/").code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(fs::is_directory(options_.workdir));
}

TEST_F(SeamTest, FileCallsCheckTheirPathAndTheBox) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  EXPECT_EQ(box->WriteFile("", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(box->ReadFile(std::string("a\0b", 3)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(box->ListDir("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(box->Remove("").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(box->ReadFile("missing").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(box->Destroy().ok());
  Status after = box->WriteFile("x", "x");
  EXPECT_EQ(after.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(after.message().find("destroyed"), std::string::npos) << after.ToString();
}

}  // namespace
}  // namespace codebox::testing
