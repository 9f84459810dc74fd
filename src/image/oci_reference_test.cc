#include "image/oci_reference.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace codebox::image {
namespace {

std::string Canon(const std::string& text) {
  auto ref = ParseImageReference(text);
  return ref.ok() ? ref->Canonical() : "error: " + ref.status().message();
}

TEST(OciReferenceTest, NormalisesAsDockerDoes) {
  EXPECT_EQ(Canon("python"), "docker.io/library/python:latest");
  EXPECT_EQ(Canon("python:3.12-slim"), "docker.io/library/python:3.12-slim");
  EXPECT_EQ(Canon("org/app"), "docker.io/org/app:latest");
  EXPECT_EQ(Canon("ghcr.io/org/team/app:v1.2"), "ghcr.io/org/team/app:v1.2");
  EXPECT_EQ(Canon("127.0.0.1:5000/app:1"), "127.0.0.1:5000/app:1");
  EXPECT_EQ(Canon("localhost/app"), "localhost/app:latest");
  std::string digest = "sha256:" + std::string(64, 'a');
  EXPECT_EQ(Canon("python@" + digest), "docker.io/library/python@" + digest);
  EXPECT_EQ(Canon("python:3.12@" + digest), "docker.io/library/python:3.12@" + digest);
  EXPECT_EQ(Canon("my_app__x-y/a---b.c"), "docker.io/my_app__x-y/a---b.c:latest");
}

TEST(OciReferenceTest, FamiliarFormDropsTheDefaults) {
  EXPECT_EQ(ParseImageReference("docker.io/library/python:3.12")->Familiar(), "python:3.12");
  EXPECT_EQ(ParseImageReference("ghcr.io/a/b:1")->Familiar(), "ghcr.io/a/b:1");
  std::string digest = "sha256:" + std::string(64, 'b');
  auto ref = ParseImageReference("127.0.0.1:5000/app:1");
  EXPECT_EQ(ref->AtDigest(digest).Canonical(), "127.0.0.1:5000/app@" + digest);
}

TEST(OciReferenceTest, RefusesMalformedReferences) {
  for (const std::string& bad : std::vector<std::string>{
           "", ":tag", "Python", "python:", "python:-x", "a//b", "/python", "python@sha256:abc",
           "python@md5:" + std::string(32, 'a'), "python@sha256:" + std::string(64, 'A'),
           "bad host.io/x", "-host.io/x", "host.io:99999999/x", "a..b", "a/b/", "py thon",
           std::string(300, 'a'), "python:" + std::string(129, 't'), std::string("py\0x", 4)}) {
    EXPECT_FALSE(ParseImageReference(bad).ok()) << "accepted '" << bad << "'";
  }
  auto st = ParseImageReference("python:-x").status();
  EXPECT_NE(st.message().find("tag"), std::string::npos) << st.message();
}

TEST(OciReferenceTest, LocalRegistries) {
  EXPECT_TRUE(IsLocalRegistry("127.0.0.1:5000"));
  EXPECT_TRUE(IsLocalRegistry("127.3.4.5"));
  EXPECT_TRUE(IsLocalRegistry("localhost:5000"));
  EXPECT_TRUE(IsLocalRegistry("[::1]:5000"));
  EXPECT_TRUE(IsLocalRegistry("10.1.2.3:80"));
  EXPECT_TRUE(IsLocalRegistry("172.16.0.1"));
  EXPECT_TRUE(IsLocalRegistry("192.168.1.1:5000"));
  EXPECT_FALSE(IsLocalRegistry("172.32.0.1"));
  EXPECT_FALSE(IsLocalRegistry("docker.io"));
  EXPECT_FALSE(IsLocalRegistry("8.8.8.8:5000"));
  EXPECT_FALSE(IsLocalRegistry("localhost.evil.com"));
}

}  // namespace
}  // namespace codebox::image
