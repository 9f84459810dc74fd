#include "image/mirror.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "base/fs.h"
#include "base/io.h"

namespace codebox::image {
namespace {

// Sample configurations use example.org hosts: no real archive is named in the repository.
constexpr char kDeb822[] = R"(Types: deb
# a comment line
URIs: http://mirror.example.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example.org/debian-security
Suites: bookworm-security
Components: main
)";

TEST(MirrorTest, Deb822) {
  std::vector<AptSource> sources = ParseDeb822Sources(kDeb822);
  ASSERT_EQ(sources.size(), 2u);
  EXPECT_EQ(sources[0].uri, "http://mirror.example.org/debian");
  EXPECT_EQ(sources[0].suites, (std::vector<std::string>{"bookworm", "bookworm-updates"}));
  auto mirror = PickMirror(sources, "bookworm");
  ASSERT_TRUE(mirror.ok());
  EXPECT_EQ(*mirror, "http://mirror.example.org/debian");
}

TEST(MirrorTest, Deb822SkipsDisabledSourceOnlyAndThirdParty) {
  std::string text = R"(Types: deb
URIs: https://thirdparty.example.com/node
Suites: nodistro
Components: main

Types: deb-src
URIs: http://src.example.org/debian
Suites: bookworm
Components: main

Types: deb
Enabled: no
URIs: http://off.example.org/debian
Suites: bookworm
Components: main

Types: deb deb-src
URIs: http://a.example.org/debian/ http://b.example.org/debian
Suites: bookworm-security
  bookworm
Components: contrib main
)";
  auto mirror = PickMirror(ParseDeb822Sources(text), "bookworm");
  ASSERT_TRUE(mirror.ok()) << mirror.status().ToString();
  EXPECT_EQ(*mirror, "http://a.example.org/debian");  // trailing slash dropped
}

TEST(MirrorTest, OneLine) {
  std::string text =
      "# deb http://commented.example.org/debian bookworm main\n"
      "deb-src http://src.example.org/debian bookworm main\n"
      "deb https://packages.example.com/apt cloud-sdk-bookworm main\n"
      "deb http://sec.example.org/debian-security bookworm-security main\n"
      "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://m.example.org/debian/ "
      "bookworm main contrib  # trailing comment\n"
      "deb http://later.example.org/debian bookworm main\n";
  std::vector<AptSource> sources = ParseOneLineSources(text);
  ASSERT_EQ(sources.size(), 4u);
  EXPECT_EQ(sources[2].components, (std::vector<std::string>{"main", "contrib"}));
  auto mirror = PickMirror(sources, "bookworm");
  ASSERT_TRUE(mirror.ok());
  EXPECT_EQ(*mirror, "http://m.example.org/debian");
}

TEST(MirrorTest, NeedsMainAndTheExactSuite) {
  auto sources = ParseOneLineSources(
      "deb http://x.example.org/debian bookworm contrib\n"
      "deb http://y.example.org/debian bookworm-updates main\n"
      "deb cdrom:[Debian]/ bookworm main\n");
  auto mirror = PickMirror(sources, "bookworm");
  EXPECT_EQ(mirror.status().code(), StatusCode::kNotFound);
  EXPECT_NE(mirror.status().message().find("CODEBOX_MIRROR"), std::string::npos);
}

TEST(MirrorTest, FindMirrorReadsAptDirInOrder) {
  char tmpl[] = "/tmp/codebox-mirror-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  ASSERT_TRUE(base::MakeDirs(dir + "/sources.list.d").ok());
  // sources.list has only security; the .d files are read in name order; disabled ones never.
  ASSERT_TRUE(base::WriteFile(dir + "/sources.list",
                              "deb http://sec.example.org/debian-security bookworm-security main\n")
                  .ok());
  ASSERT_TRUE(base::WriteFile(dir + "/sources.list.d/00-off.list.disabled",
                              "deb http://disabled.example.org/debian bookworm main\n")
                  .ok());
  ASSERT_TRUE(base::WriteFile(dir + "/sources.list.d/10-debian.sources", kDeb822).ok());
  ASSERT_TRUE(base::WriteFile(dir + "/sources.list.d/20-other.list",
                              "deb http://other.example.org/debian bookworm main\n")
                  .ok());
  ::unsetenv("CODEBOX_MIRROR");
  auto mirror = FindMirror("bookworm", dir);
  ASSERT_TRUE(mirror.ok()) << mirror.status().ToString();
  EXPECT_EQ(*mirror, "http://mirror.example.org/debian");
  EXPECT_EQ(FindMirror("trixie", dir).status().code(), StatusCode::kNotFound);
  ::setenv("CODEBOX_MIRROR", "http://override.example.org/debian", 1);
  EXPECT_EQ(*FindMirror("bookworm", dir), "http://override.example.org/debian");
  ::unsetenv("CODEBOX_MIRROR");
  ASSERT_TRUE(base::RemoveTree(dir).ok());
}

}  // namespace
}  // namespace codebox::image
