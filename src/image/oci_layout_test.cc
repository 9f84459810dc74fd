#include "image/oci_layout.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace codebox::image {
namespace {

const std::string kDigestA = "sha256:" + std::string(64, 'a');
const std::string kDigestB = "sha256:" + std::string(64, 'b');

TEST(OciLayoutTest, TellsIndexesFromManifests) {
  EXPECT_TRUE(*IsImageIndex(R"({"mediaType": "application/vnd.oci.image.index.v1+json",
                                "manifests": []})"));
  EXPECT_TRUE(*IsImageIndex(R"({"manifests": []})"));
  EXPECT_FALSE(
      *IsImageIndex(R"({"mediaType": "application/vnd.docker.distribution.manifest.v2+json"})"));
  EXPECT_FALSE(IsImageIndex("not json").ok());
  EXPECT_FALSE(IsImageIndex("[1, 2]").ok());
  auto v1 = IsImageIndex(R"({"schemaVersion": 1, "fsLayers": []})");
  ASSERT_FALSE(v1.ok());
  EXPECT_NE(v1.status().message().find("schema 1"), std::string::npos);
}

TEST(OciLayoutTest, SelectsLinuxAmd64AndNamesWhatThereIs) {
  std::string index = R"({"manifests": [
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": ")" +
                      kDigestA +
                      R"(", "size": 10, "platform": {"os": "linux", "architecture": "arm64"}},
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": ")" +
                      kDigestB +
                      R"(", "size": 12, "platform": {"os": "linux", "architecture": "amd64"}}]})";
  auto chosen = SelectPlatform(index);
  ASSERT_TRUE(chosen.ok()) << chosen.status().message();
  EXPECT_EQ(chosen->digest, kDigestB);
  EXPECT_EQ(chosen->size, 12u);

  std::string arm_only = R"({"manifests": [{"digest": ")" + kDigestA +
                         R"(", "size": 1, "platform": {"os": "linux", "architecture": "arm64"}}]})";
  auto none = SelectPlatform(arm_only);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("linux/arm64"), std::string::npos);
}

TEST(OciLayoutTest, ManifestDescriptorsAreChecked) {
  std::string good = R"({"config": {"mediaType": "application/vnd.oci.image.config.v1+json",
      "digest": ")" + kDigestA +
                     R"(", "size": 5}, "layers": [
      {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": ")" +
                     kDigestB + R"(", "size": 7}]})";
  auto m = ParseManifest(good);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->layers.size(), 1u);
  EXPECT_EQ(m->LayerBytes(), 7u);

  for (const std::string& bad : std::vector<std::string>{
           R"({"layers": []})",                                                 // no config
           R"({"config": {"digest": "sha256:abc", "size": 1}, "layers": []})",  // short digest
           R"({"config": {"digest": ")" + kDigestA + R"(", "size": -1}, "layers": []})",
           R"({"config": {"digest": ")" + kDigestA + R"(", "size": "5"}, "layers": []})",
           R"({"config": {"digest": ")" + kDigestA + R"(", "size": 1}, "layers": {}})",
           R"({"config": {"mediaType": "application/vnd.cncf.helm.config.v1+json", "digest": ")" +
               kDigestA + R"(", "size": 1}, "layers": []})",
           R"({"config": {"digest": ")" + kDigestA + R"(", "size": 1}, "layers": [
               {"mediaType": "text/plain", "digest": ")" +
               kDigestB + R"(", "size": 1}]})"}) {
    EXPECT_FALSE(ParseManifest(bad).ok()) << bad;
  }
}

TEST(OciLayoutTest, ConfigEnvWorkdirAndUser) {
  auto c = ParseImageConfig(R"({"os": "linux", "architecture": "amd64", "config": {
      "Env": ["PATH=/usr/local/bin:/usr/bin", "LANG=C.UTF-8", "EMPTY="],
      "WorkingDir": "srv//app/.", "User": "app:staff"}})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->env.size(), 3u);
  EXPECT_EQ(c->env[0], "PATH=/usr/local/bin:/usr/bin");
  EXPECT_EQ(c->working_dir, "/srv/app");
  EXPECT_EQ(c->user, "app:staff");

  EXPECT_FALSE(ParseImageConfig(R"({"architecture": "arm64", "os": "linux"})").ok());
  EXPECT_FALSE(ParseImageConfig(R"({"config": {"Env": ["NOEQUALS"]}})").ok());
  EXPECT_FALSE(ParseImageConfig(R"({"config": {"Env": ["=x"]}})").ok());
  EXPECT_FALSE(ParseImageConfig(R"({"config": {"Env": [1]}})").ok());
  EXPECT_FALSE(ParseImageConfig(R"({"config": {"WorkingDir": "/a/../../etc"}})").ok());
  EXPECT_FALSE(ParseImageConfig(R"({"config": {"User": 5}})").ok());
  EXPECT_FALSE(ParseImageConfig(R"({"config": {"User": "a\nb"}})").ok());
  auto empty = ParseImageConfig(R"({"config": null})");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->env.empty());
}

}  // namespace
}  // namespace codebox::image
