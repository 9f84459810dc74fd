#include "e2b/filesystem.h"

#include <gtest/gtest.h>

#include "base/json.h"

namespace codebox::e2b {
namespace {

using nlohmann::json;

TEST(FilesystemMessagesTest, AbsolutePathsStayUnderRoot) {
  EXPECT_EQ(AbsolutePath("a.txt", "/home/user"), "/home/user/a.txt");
  EXPECT_EQ(AbsolutePath("/tmp//x/./y/", "/home/user"), "/tmp/x/y");
  EXPECT_EQ(AbsolutePath("../../../../etc", "/home/user"), "/etc");
  EXPECT_EQ(AbsolutePath("/..", "/home/user"), "/");
  EXPECT_EQ(AbsolutePath(".", "/home/user"), "/home/user");
}

TEST(FilesystemMessagesTest, PathsAndDepthsAreChecked) {
  EXPECT_EQ(*PathFromJson(json{{"path", "/a"}}), "/a");
  EXPECT_FALSE(PathFromJson(json{{"path", ""}}).ok());
  EXPECT_FALSE(PathFromJson(json{{"path", 3}}).ok());
  EXPECT_FALSE(PathFromJson(json{{"path", std::string("a\0b", 3)}}).ok());
  EXPECT_FALSE(PathFromJson(json{{"path", std::string(kMaxPathBytes + 1, 'a')}}).ok());
  EXPECT_FALSE(PathFromJson(json::array()).ok());
  EXPECT_EQ(ListDirFromJson(json{{"path", "/a"}})->depth, 1);
  EXPECT_EQ(ListDirFromJson(json{{"path", "/a"}, {"depth", 0}})->depth, 1);
  EXPECT_EQ(ListDirFromJson(json{{"path", "/a"}, {"depth", 3}})->depth, 3);
  EXPECT_FALSE(ListDirFromJson(json{{"path", "/a"}, {"depth", kMaxListDepth + 1}}).ok());
  EXPECT_FALSE(ListDirFromJson(json{{"path", "/a"}, {"depth", -1}}).ok());
}

TEST(FilesystemMessagesTest, EntriesAsEnvdDescribesThem) {
  json e = EntryInfoToJson(
      {.name = "a.txt", .path = "/home/user/a.txt", .type = "file", .size = 12, .mode = 0644});
  EXPECT_EQ(e["type"], "FILE_TYPE_FILE");
  EXPECT_EQ(e["size"], "12");
  EXPECT_EQ(e["permissions"], "-rw-r--r--");
  json d = EntryInfoToJson({.name = "d", .path = "/d", .type = "dir", .size = 0, .mode = 0755});
  EXPECT_EQ(d["type"], "FILE_TYPE_DIRECTORY");
  EXPECT_EQ(d["permissions"], "drwxr-xr-x");
  EXPECT_EQ(
      EntryInfoToJson({.name = "f", .path = "/f", .type = "other", .size = 0, .mode = 0})["type"],
      "FILE_TYPE_UNSPECIFIED");
}

constexpr std::string_view kType = "multipart/form-data; boundary=----formdata-undici-0844";

TEST(FilesystemMessagesTest, FormFilesAsUndiciSendsThem) {
  const std::string body =
      "------formdata-undici-0844\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"/home/user/f.txt\"\r\n"
      "Content-Type: application/octet-stream\r\n\r\n"
      "hello\r\nworld\r\n"
      "------formdata-undici-0844\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"two %22q%22%0A.txt\"\r\n\r\n"
      "\r\n"
      "------formdata-undici-0844--\r\n";
  auto files = ParseFormFiles(kType, body);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].filename, "/home/user/f.txt");
  EXPECT_EQ((*files)[0].data, "hello\r\nworld");
  EXPECT_EQ((*files)[1].filename, "two \"q\"\n.txt");
  EXPECT_EQ((*files)[1].data, "");
}

TEST(FilesystemMessagesTest, HostileFormsAreRefused) {
  const std::string part =
      "------formdata-undici-0844\r\nContent-Disposition: form-data; name=\"file\"; "
      "filename=\"a\"\r\n\r\nx\r\n";
  for (const std::string& body : {
           std::string(),                                      // no part
           part,                                               // never closed
           std::string("------formdata-undici-0844\r\nX: y"),  // headers never end
           std::string("------formdata-undici-0844\r\nContent-Disposition: form-data; "
                       "name=\"file\"\r\n\r\nx\r\n------formdata-undici-0844--"),  // no filename
           std::string("------formdata-undici-0844junk"),
           std::string("------formdata-undici-0844\r\n") + std::string(9000, 'h') + "\r\n\r\n",
       }) {
    EXPECT_FALSE(ParseFormFiles(kType, body).ok()) << base::Excerpt(body, 80);
  }
  EXPECT_FALSE(ParseFormFiles("text/plain", part).ok());
  EXPECT_FALSE(ParseFormFiles("multipart/form-data", part).ok()) << "no boundary";
  std::string many;
  for (size_t i = 0; i <= kMaxFormParts; ++i) many += part;
  many += "------formdata-undici-0844--";
  EXPECT_FALSE(ParseFormFiles(kType, many).ok()) << "past the part bound";
}

TEST(FilesystemMessagesTest, WrittenFilesNameEach) {
  json out = WrittenFilesToJson({"/home/user/a/b.txt"});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["name"], "b.txt");
  EXPECT_EQ(out[0]["type"], "file");
  EXPECT_EQ(out[0]["path"], "/home/user/a/b.txt");
}

// Signatures as E2B's SDK makes them (node's crypto gave these values).
TEST(FilesystemMessagesTest, FileUrlSignaturesMatchTheSdks) {
  EXPECT_EQ(SignFileUrl({.path = "/home/user/a.txt", .operation = "read"}, "abc"),
            "v1_+oUuSuDwZH607yeEMzKYH5g8Lm4NXH3iGDZ0mZif/S8");
  EXPECT_EQ(SignFileUrl({.path = "a.txt", .operation = "write", .user = "root",
                         .expiration = 1900000000},
                        "abc"),
            "v1_XlPwOgxFiOZMFt/IhqTTGZHBf9ixhQu2wmbVhRLp074");
}

TEST(FilesystemMessagesTest, FileUrlSignatureClaimsAreChecked) {
  const std::string sig = "v1_" + std::string(43, 'A');
  auto read = FileUrlSignatureFrom("GET", {{"path", "a"}, {"signature", sig}}, 100);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->operation, "read");
  EXPECT_EQ(read->user, "");
  EXPECT_FALSE(read->expiration.has_value());
  auto write = FileUrlSignatureFrom(
      "POST", {{"username", "root"}, {"signature", sig}, {"signature_expiration", "100"}}, 100);
  ASSERT_TRUE(write.ok()) << write.status().message();
  EXPECT_EQ(write->operation, "write");
  EXPECT_EQ(write->user, "root");
  EXPECT_EQ(write->expiration, 100u);

  EXPECT_EQ(FileUrlSignatureFrom("GET", {{"signature", sig}, {"signature_expiration", "99"}}, 100)
                .status()
                .code(),
            StatusCode::kPermissionDenied);
  for (const std::string& bad : {std::string("v2_") + std::string(43, 'A'), std::string("v1_"),
                                 sig + "A"}) {
    EXPECT_EQ(FileUrlSignatureFrom("GET", {{"signature", bad}}, 100).status().code(),
              StatusCode::kInvalidArgument)
        << bad;
  }
  for (const char* expiration : {"-1", "1e9", "99999999999999999999", ""}) {
    auto got = FileUrlSignatureFrom(
        "GET", {{"signature", sig}, {"signature_expiration", expiration}}, 100);
    if (*expiration == '\0') {
      EXPECT_TRUE(got.ok());
    } else {
      EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << expiration;
    }
  }
  EXPECT_EQ(FileUrlSignatureFrom("DELETE", {{"signature", sig}}, 100).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(FileUrlSignatureFrom("GET", {{"signature", sig}, {"path", std::string(5000, 'a')}},
                                 100)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace codebox::e2b
