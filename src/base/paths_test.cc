#include "base/paths.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

// What codebox-config.cmake compiles into a program built against an installed package
// (cmake/codebox-config.cmake.in): here, a package moved to /moved/prefix, which does not exist.
extern "C" const char* codebox_installed_libexec_dir() { return "/moved/prefix/libexec/codebox"; }
extern "C" const char* codebox_installed_images_dir() { return "/moved/prefix/share/codebox/images"; }

namespace codebox::base {
namespace {

// Sets an environment variable for one test and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* v = std::getenv(name)) {
      saved_ = v;
      had_ = true;
    }
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { had_ ? ::setenv(name_, saved_.c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::string saved_;
  bool had_ = false;
};

class PathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/codebox-paths-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string MakeFile(const std::string& name, mode_t mode) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n";
    ::chmod(path.c_str(), mode);
    return path;
  }
  std::string dir_;
};

TEST_F(PathsTest, PerBinaryVariableComesFirst) {
  std::string exact = MakeFile("my-agent", 0755);
  ScopedEnv libexec("CODEBOX_LIBEXEC", dir_);
  MakeFile("codebox-agent", 0755);
  ScopedEnv agent("CODEBOX_AGENT", exact);
  EXPECT_EQ(FindHelperBinary("codebox-agent"), exact);
}

TEST_F(PathsTest, LibexecVariableIsSearchedAndNeedsAnExecutable) {
  ScopedEnv libexec("CODEBOX_LIBEXEC", dir_);
  MakeFile("codebox-test-helper", 0644);
  EXPECT_EQ(FindHelperBinary("codebox-test-helper"), "");
  ::chmod((dir_ + "/codebox-test-helper").c_str(), 0755);
  EXPECT_EQ(FindHelperBinary("codebox-test-helper"), dir_ + "/codebox-test-helper");
}

TEST_F(PathsTest, CandidatesFollowTheDocumentedLayoutsAndEndWithTheInstallDir) {
  auto c = HelperBinaryCandidates("codebox-test-helper");
  std::string d = LibraryObjectDir();
  ASSERT_GE(c.size(), 5u);
  EXPECT_EQ(c[0], d + "/codebox-test-helper");
  EXPECT_EQ(c[1], d + "/codebox-libexec/codebox-test-helper");
  EXPECT_EQ(c[2], d + "/../libexec/codebox/codebox-test-helper");
  EXPECT_EQ(c[3], d + "/../bin/codebox-test-helper");
  EXPECT_EQ(c.back().find("/libexec/codebox/codebox-test-helper"),
            c.back().size() - std::string("/libexec/codebox/codebox-test-helper").size());
  EXPECT_EQ(c.back()[0], '/');
  std::string message = HelperNotFoundMessage("codebox-test-helper");
  EXPECT_NE(message.find(c[1]), std::string::npos) << message;
  EXPECT_NE(message.find("$CODEBOX_LIBEXEC"), std::string::npos) << message;
}

TEST_F(PathsTest, AFindPackageProgramLooksWhereItsPackageIsBeforeTheCompiledInDir) {
  auto c = HelperBinaryCandidates("codebox-test-helper");
  ASSERT_GE(c.size(), 2u);
  EXPECT_EQ(c[c.size() - 2], "/moved/prefix/libexec/codebox/codebox-test-helper");
  EXPECT_NE(c.back(), c[c.size() - 2]);
  // A package's images dir that is not there is passed over.
  EXPECT_NE(FindRecipeDir(), "/moved/prefix/share/codebox/images");
}

TEST_F(PathsTest, StaticallyLinkedCodeLooksBesideTheExecutable) {
  EXPECT_EQ(LibraryObjectDir(), SelfExeDir());
}

TEST_F(PathsTest, RecipeDirFromVariableThenBuildTreeLayout) {
  {
    ScopedEnv images("CODEBOX_IMAGES", dir_);
    EXPECT_EQ(FindRecipeDir(), dir_);
  }
  // The build tree gives this test binary's bin/ a ../share/codebox/images (CMakeLists.txt).
  std::string found = FindRecipeDir();
  struct stat st;
  EXPECT_EQ(::stat((found + "/python/recipe").c_str(), &st), 0) << found;
}

}  // namespace
}  // namespace codebox::base
