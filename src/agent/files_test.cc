#include "agent/files.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace codebox::agent {
namespace {

namespace fs = std::filesystem;

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/codebox-agent-files-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::vector<std::string> Names() {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string dir_;
};

TEST_F(FilesTest, AWriteAppearsOnlyWhenFinished) {
  const std::string path = dir_ + "/out.txt";
  auto w = FileWriter::Open(path, 0640, false);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE(w->Write("hello ").ok());
  ASSERT_TRUE(w->Write("world").ok());
  EXPECT_FALSE(fs::exists(path)) << "no partial file under the target name";
  ASSERT_TRUE(w->Finish().ok());
  EXPECT_EQ(Read(path), "hello world");
  EXPECT_EQ(Names(), std::vector<std::string>{"out.txt"}) << "no temporary file left";
  EXPECT_EQ(w->Write("more").code(), StatusCode::kInternal);
}

TEST_F(FilesTest, AnUnfinishedWriteLeavesNothing) {
  {
    auto w = FileWriter::Open(dir_ + "/half.txt", 0644, false);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->Write("half").ok());
  }
  EXPECT_TRUE(Names().empty());
}

TEST_F(FilesTest, TheModeIsExactlyWhatWasAskedWhateverTheUmask) {
  mode_t old = ::umask(077);
  auto w = FileWriter::Open(dir_ + "/x", 0755, false);
  ::umask(old);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->Finish().ok());
  struct stat st;
  ASSERT_EQ(::stat((dir_ + "/x").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
}

TEST_F(FilesTest, AWriteReplacesAFinalSymlinkInsteadOfFollowingIt) {
  const std::string victim = dir_ + "/victim";
  { std::ofstream(victim) << "keep"; }
  fs::create_symlink(victim, dir_ + "/link");
  auto w = FileWriter::Open(dir_ + "/link", 0644, false);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->Write("new").ok());
  ASSERT_TRUE(w->Finish().ok());
  EXPECT_EQ(Read(victim), "keep");
  EXPECT_FALSE(fs::is_symlink(dir_ + "/link"));
  EXPECT_EQ(Read(dir_ + "/link"), "new");
}

TEST_F(FilesTest, WriteOpenChecksThePath) {
  EXPECT_EQ(FileWriter::Open("", 0644, false).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(FileWriter::Open(dir_ + "/d/", 0644, false).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(FileWriter::Open(dir_ + "/no/such/f", 0644, false).status().code(),
            StatusCode::kNotFound);
  auto made = FileWriter::Open(dir_ + "/new/dirs/f", 0644, true);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  ASSERT_TRUE(made->Finish().ok());
  EXPECT_TRUE(fs::is_regular_file(dir_ + "/new/dirs/f"));
}

TEST_F(FilesTest, MakeDirLikeMkdirP) {
  EXPECT_EQ(MakeDir("", 0755, true).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(MakeDir(dir_ + "/a/b/c", 0700, true).ok());
  EXPECT_TRUE(fs::is_directory(dir_ + "/a/b/c"));
  EXPECT_TRUE(MakeDir(dir_ + "/a/b/c", 0700, true).ok()) << "an existing dir is fine with parents";
  EXPECT_EQ(MakeDir(dir_ + "/a/b/c", 0700, false).code(), StatusCode::kInvalidArgument)
      << "EEXIST without parents";
  EXPECT_EQ(MakeDir(dir_ + "/x/y", 0700, false).code(), StatusCode::kNotFound);
  { std::ofstream(dir_ + "/file") << "f"; }
  Status st = MakeDir(dir_ + "/file", 0700, true);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("exists and is not a directory"), std::string::npos) << st.ToString();
}

TEST_F(FilesTest, OpenForReadTakesRegularFilesOnly) {
  { std::ofstream(dir_ + "/f") << "12345"; }
  ::chmod((dir_ + "/f").c_str(), 0600);
  auto f = OpenForRead(dir_ + "/f");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->size, 5u);
  EXPECT_EQ(f->mode, 0600u);

  fs::create_symlink(dir_ + "/f", dir_ + "/link");
  auto link = OpenForRead(dir_ + "/link");
  EXPECT_EQ(link.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(link.status().message().find("symbolic link"), std::string::npos);

  ASSERT_EQ(::mkfifo((dir_ + "/fifo").c_str(), 0600), 0);
  auto fifo = OpenForRead(dir_ + "/fifo");  // must not block waiting for a writer
  EXPECT_EQ(fifo.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fifo.status().message().find("a FIFO"), std::string::npos);

  auto dir = OpenForRead(dir_);
  EXPECT_EQ(dir.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dir.status().message().find("a directory"), std::string::npos);

  EXPECT_EQ(OpenForRead(dir_ + "/missing").status().code(), StatusCode::kNotFound);
}

TEST_F(FilesTest, ListDirNamesEachEntrysType) {
  { std::ofstream(dir_ + "/f") << "abc"; }
  fs::create_directory(dir_ + "/d");
  fs::create_symlink("/etc/passwd", dir_ + "/l");
  ASSERT_EQ(::mkfifo((dir_ + "/p").c_str(), 0600), 0);
  auto listing = ListDir(dir_);
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  EXPECT_EQ((*listing)["event"], "entries");
  std::map<std::string, std::string> types;
  for (const auto& e : (*listing)["entries"]) {
    types[e["name"].get<std::string>()] = e["type"].get<std::string>();
    if (e["name"] == "f") {
      EXPECT_EQ(e["size"], 3);
    }
  }
  EXPECT_EQ(types, (std::map<std::string, std::string>{
                       {"d", "dir"}, {"f", "file"}, {"l", "symlink"}, {"p", "other"}}));
  EXPECT_EQ(ListDir(dir_ + "/f").status().code(), StatusCode::kNotFound) << "ENOTDIR";
  EXPECT_EQ(ListDir(dir_ + "/p").status().code(), StatusCode::kNotFound) << "a FIFO, unblocked";
}

TEST_F(FilesTest, RemoveAFileAndAWholeTree) {
  { std::ofstream(dir_ + "/f") << "x"; }
  ASSERT_TRUE(Remove(dir_ + "/f").ok());
  EXPECT_FALSE(fs::exists(dir_ + "/f"));

  fs::create_directories(dir_ + "/t/a/b/c");
  { std::ofstream(dir_ + "/t/a/b/c/deep") << "d"; }
  { std::ofstream(dir_ + "/t/top") << "t"; }
  ASSERT_EQ(::mkfifo((dir_ + "/t/a/fifo").c_str(), 0600), 0);
  Status st = Remove(dir_ + "/t/");  // a trailing slash names the same directory
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(fs::exists(dir_ + "/t"));
  EXPECT_TRUE(Names().empty());
}

TEST_F(FilesTest, RemoveNeverFollowsSymlinks) {
  const std::string outside = dir_ + "/outside";
  fs::create_directories(outside + "/sub");
  { std::ofstream(outside + "/keep") << "keep"; }
  { std::ofstream(outside + "/sub/keep") << "keep"; }
  fs::create_directories(dir_ + "/tree/inner");
  fs::create_directory_symlink(outside, dir_ + "/tree/link-to-dir");
  fs::create_directory_symlink(outside, dir_ + "/tree/inner/deeper-link");
  fs::create_symlink(outside + "/keep", dir_ + "/tree/link-to-file");
  ASSERT_TRUE(Remove(dir_ + "/tree").ok());
  EXPECT_FALSE(fs::exists(dir_ + "/tree"));
  EXPECT_EQ(Read(outside + "/keep"), "keep");
  EXPECT_EQ(Read(outside + "/sub/keep"), "keep");

  // A symlink as the path itself is removed, and its target stays.
  fs::create_directory_symlink(outside, dir_ + "/top-link");
  ASSERT_TRUE(Remove(dir_ + "/top-link").ok());
  EXPECT_FALSE(fs::is_symlink(dir_ + "/top-link"));
  EXPECT_EQ(Read(outside + "/sub/keep"), "keep");
}

TEST_F(FilesTest, RemoveRefusesRootEmptyAndDotsAndReportsMissing) {
  for (const char* bad : {"", "/", "//", "///"}) {
    Status st = Remove(bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "\"" << bad << "\": " << st.ToString();
  }
  EXPECT_NE(Remove("/").message().find("root directory"), std::string::npos);
  fs::create_directory(dir_ + "/d");
  EXPECT_EQ(Remove(dir_ + "/d/.").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Remove(dir_ + "/d/..").code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(fs::exists(dir_ + "/d"));
  Status missing = Remove(dir_ + "/missing");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound) << missing.ToString();
  EXPECT_NE(missing.message().find(dir_ + "/missing"), std::string::npos) << missing.ToString();
  EXPECT_EQ(Remove(dir_ + "/no/such/parent").code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrorCodeName(missing), "not_found");
}

TEST_F(FilesTest, RemoveStopsAtAMountPointInsideTheTree) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs inside the tree needs root";
  fs::create_directories(dir_ + "/m/mnt");
  if (::system(("mount -t tmpfs none '" + dir_ + "/m/mnt' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here";
  }
  { std::ofstream(dir_ + "/m/mnt/inside") << "i"; }
  Status st = Remove(dir_ + "/m");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("mount point"), std::string::npos) << st.ToString();
  EXPECT_TRUE(fs::exists(dir_ + "/m/mnt/inside"));
  EXPECT_EQ(::system(("umount '" + dir_ + "/m/mnt'").c_str()), 0);
}

TEST(ErrorCodeName, IsTheProtocolsName) {
  EXPECT_EQ(ErrorCodeName(NotFound("x")), "not_found");
  EXPECT_EQ(ErrorCodeName(InvalidArgument("x")), "invalid_argument");
}

}  // namespace
}  // namespace codebox::agent
