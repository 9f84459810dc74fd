// RemoteBox's CopyIn and CopyOut against a fake server: what goes up, and how what comes down
// is written (never through a host symlink, limits enforced here, a hostile tar refused with
// nothing left behind).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/io.h"
#include "codebox/box.h"
#include "http/tar.h"
#include "tests/remote/fake_server.h"

namespace codebox {
namespace {

using testing::kBoxPath;
using testing::Limits;
using testing::RemoteBoxTest;

class RemoteCopyTest : public RemoteBoxTest {
 protected:
  void SetUp() override {
    RemoteBoxTest::SetUp();
    auto dir = base::MakeTempDir(base::TempRoot(), "codebox-remote-copy-");
    ASSERT_TRUE(dir.ok());
    host_ = *dir;
  }
  void TearDown() override { (void)base::RemoveTree(host_); }

  void ServeTar(std::string archive) {
    server_.On("GET", std::string(kBoxPath) + "/files",
               [archive](const http::Request&, http::Exchange& e) {
                 testing::Respond(e, 200, archive, "application/x-tar");
               });
  }

  std::string host_;
};

TEST_F(RemoteCopyTest, CopyInSendsAFileOrADirectoryAsTar) {
  std::vector<http::Request> puts;
  server_.On("PUT", std::string(kBoxPath) + "/files",
             [&](const http::Request& r, http::Exchange& e) {
               puts.push_back(r);
               testing::Respond(e, 204, "");
             });
  auto box = Create();
  ASSERT_NE(box, nullptr);
  ASSERT_TRUE(base::WriteFile(host_ + "/f.txt", "data").ok());
  ::chmod((host_ + "/f.txt").c_str(), 0640);
  ASSERT_TRUE(base::MakeDirs(host_ + "/d/sub").ok());
  ASSERT_TRUE(base::WriteFile(host_ + "/d/sub/g", "gg").ok());
  ASSERT_TRUE(box->CopyIn(host_ + "/f.txt", "in/f.txt").ok());
  ASSERT_TRUE(box->CopyIn(host_ + "/d", "in/d").ok());
  ASSERT_EQ(puts.size(), 2u);
  EXPECT_EQ(puts[0].body, "data");
  EXPECT_EQ(puts[0].query.at("mode"), "0640");
  EXPECT_EQ(puts[1].Header("content-type"), "application/x-tar");
  auto out = base::MakeTempDir(host_, "untar-");
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(http::UntarInto(puts[1].body, *out, {}).ok());
  EXPECT_EQ(*base::ReadFile(*out + "/sub/g"), "gg");
  EXPECT_FALSE(box->CopyIn(host_ + "/missing", "x").ok());
}

TEST_F(RemoteCopyTest, CopyOutWritesAFileNeverThroughASymlink) {
  server_.On("GET", std::string(kBoxPath) + "/files", [](const http::Request&, http::Exchange& e) {
    testing::Respond(e, 200, "new", "application/octet-stream");
  });
  auto box = Create();
  ASSERT_NE(box, nullptr);
  ASSERT_TRUE(base::WriteFile(host_ + "/victim", "old").ok());
  ASSERT_EQ(::symlink((host_ + "/victim").c_str(), (host_ + "/link").c_str()), 0);
  ASSERT_TRUE(box->CopyOut("f", host_ + "/link").ok());
  EXPECT_EQ(*base::ReadFile(host_ + "/victim"), "old");  // the link itself was replaced
  struct stat st;
  ASSERT_EQ(::lstat((host_ + "/link").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07000, 0u);
  ASSERT_TRUE(box->CopyOut("f", host_ + "/made/parents/f").ok());
  EXPECT_EQ(*base::ReadFile(host_ + "/made/parents/f"), "new");
  auto over = box->CopyOut("f", host_ + "/small", Limits(2));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.code(), StatusCode::kLimitExceeded);
  EXPECT_FALSE(base::PathExists(host_ + "/small"));
}

TEST_F(RemoteCopyTest, CopyOutExtractsADirectoryAndMergesIt) {
  ServeTar(testing::TarEntry("sub/", "", '5') + testing::TarEntry("sub/a.txt", "A") +
           testing::TarEntry("b.txt", "B") + testing::TarEnd());
  auto box = Create();
  ASSERT_NE(box, nullptr);
  ASSERT_TRUE(base::MakeDirs(host_ + "/out").ok());
  ASSERT_TRUE(base::WriteFile(host_ + "/out/keep", "K").ok());
  Status st = box->CopyOut("dir", host_ + "/out");
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(*base::ReadFile(host_ + "/out/sub/a.txt"), "A");
  EXPECT_EQ(*base::ReadFile(host_ + "/out/b.txt"), "B");
  EXPECT_EQ(*base::ReadFile(host_ + "/out/keep"), "K");
  // No temp dir is left next to it.
  for (const std::string& name : base::ListDirectory(host_)) EXPECT_EQ(name, "out");
}

TEST_F(RemoteCopyTest, CopyOutRefusesAHostileTarAndLeavesNothing) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  for (const std::string& archive :
       {testing::TarEntry("ok.txt", "fine") + testing::TarEntry("../evil", "x") + testing::TarEnd(),
        testing::TarEntry("/abs", "x") + testing::TarEnd(), std::string("not a tar at all")}) {
    ServeTar(archive);
    Status st = box->CopyOut("dir", host_ + "/out");
    EXPECT_FALSE(st.ok());
    EXPECT_TRUE(st.code() == StatusCode::kInvalidArgument) << st.ToString();
    EXPECT_FALSE(base::PathExists(host_ + "/evil"));
    EXPECT_FALSE(base::PathExists(host_ + "/out/ok.txt")) << st.ToString();
    for (const std::string& name : base::ListDirectory(host_)) {
      EXPECT_EQ(name.find(".codebox-copy-out-"), std::string::npos) << name;
    }
    (void)base::RemoveTree(host_ + "/out");
  }
}

TEST_F(RemoteCopyTest, CopyOutMakesNoSymlinkFromATar) {
  // A symlink entry (type '2', target empty here) is refused or skipped; never made.
  ServeTar(testing::TarEntry("link", "", '2') + testing::TarEnd());
  auto box = Create();
  ASSERT_NE(box, nullptr);
  (void)box->CopyOut("dir", host_ + "/out");
  struct stat st;
  EXPECT_NE(::lstat((host_ + "/out/link").c_str(), &st), 0);
}

TEST_F(RemoteCopyTest, CopyOutHonoursEntryAndByteLimits) {
  ServeTar(testing::TarEntry("a", "aaaa") + testing::TarEntry("b", "bbbb") + testing::TarEnd());
  auto box = Create();
  ASSERT_NE(box, nullptr);
  Status entries = box->CopyOut("dir", host_ + "/e", Limits(0, 1));
  EXPECT_EQ(entries.code(), StatusCode::kLimitExceeded) << entries.ToString();
  Status bytes = box->CopyOut("dir", host_ + "/b", Limits(5));
  EXPECT_EQ(bytes.code(), StatusCode::kLimitExceeded) << bytes.ToString();
  EXPECT_FALSE(base::PathExists(host_ + "/e/a"));
  EXPECT_FALSE(base::PathExists(host_ + "/b/a"));
}

}  // namespace
}  // namespace codebox
