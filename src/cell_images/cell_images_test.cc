// Checked decoding and saving of cell images: every input here is what a hostile box could
// send as image/png, image/jpeg or image/svg+xml.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/fs.h"
#include "cell_images/image_data.h"
#include "cell_images/image_files.h"

namespace codebox::cell_images {
namespace {

std::string Base64(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t g = static_cast<unsigned char>(bytes[i]) << 16 |
                 static_cast<unsigned char>(bytes[i + 1]) << 8 |
                 static_cast<unsigned char>(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(g >> s) & 63];
  }
  if (bytes.size() - i == 1) {
    uint32_t g = static_cast<unsigned char>(bytes[i]) << 16;
    out += std::string{kAlphabet[g >> 18], kAlphabet[(g >> 12) & 63]} + "==";
  } else if (bytes.size() - i == 2) {
    uint32_t g =
        static_cast<unsigned char>(bytes[i]) << 16 | static_cast<unsigned char>(bytes[i + 1]) << 8;
    out +=
        std::string{kAlphabet[g >> 18], kAlphabet[(g >> 12) & 63], kAlphabet[(g >> 6) & 63]} + "=";
  }
  return out;
}

std::string Be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

// The start of a PNG: signature and an IHDR claiming width x height (CRC not checked).
std::string PngHeader(uint32_t width, uint32_t height) {
  return std::string("\x89PNG\r\n\x1a\n", 8) + Be32(13) + "IHDR" + Be32(width) + Be32(height) +
         std::string("\x08\x02\x00\x00\x00", 5) + Be32(0);
}

TEST(DecodeBase64, RoundTripsEveryLengthAndSkipsLineBreaks) {
  std::string bytes;
  for (int i = 0; i < 300; ++i) bytes.push_back(static_cast<char>(i * 7));
  for (size_t n : {0u, 1u, 2u, 3u, 4u, 5u, 299u}) {
    auto d = DecodeBase64(Base64(bytes.substr(0, n)), 1 << 20);
    ASSERT_TRUE(d.ok()) << n << ": " << d.status().ToString();
    EXPECT_EQ(*d, bytes.substr(0, n));
  }
  std::string wrapped = Base64(bytes);
  wrapped.insert(76, "\n");
  wrapped.insert(20, "\r\n ");
  EXPECT_EQ(*DecodeBase64(wrapped, 1 << 20), bytes);
  // What Python's base64.encodebytes gives for a PNG's signature: binary, broken lines.
  EXPECT_EQ(*DecodeBase64("iVBORw0K\nGgo=\n", 100), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(*DecodeBase64("AAD/", 100), std::string("\0\0\xff", 3));
}

TEST(DecodeBase64, RefusesWhatIsNotBase64) {
  for (std::string bad : std::vector<std::string>{
           "not base64!", "abc", "ab=c", "a===", "====", "QUJD=QUJD",
           "QQ==QQ==", std::string("QU\0J", 4), "QUJD\xff", "Z", "=Zg", "Zg===", "Zm9vYg"}) {
    auto d = DecodeBase64(bad, 1 << 20);
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(d.status().message().find("base64"), std::string::npos);
  }
}

TEST(DecodeBase64, RefusesPastTheLimitBeforeDecoding) {
  std::string big(4 << 20, 'A');
  auto d = DecodeBase64(big, 1 << 20);
  EXPECT_EQ(d.status().code(), StatusCode::kLimitExceeded);
  EXPECT_EQ(DecodeBase64(Base64(std::string(10, 'x')), 9).status().code(),
            StatusCode::kLimitExceeded);
  EXPECT_TRUE(DecodeBase64(Base64(std::string(10, 'x')), 10).ok());
}

TEST(PngSize, ReadsTheHeader) {
  auto s = PngSize(PngHeader(640, 480));
  ASSERT_TRUE(s.ok() && s->has_value());
  EXPECT_EQ((*s)->width, 640u);
  EXPECT_EQ((*s)->height, 480u);
}

TEST(PngSize, LyingOrBrokenHeaders) {
  // A size PNG does not allow: kept as "unknown", not believed.
  EXPECT_FALSE(PngSize(PngHeader(0, 480))->has_value());
  EXPECT_FALSE(PngSize(PngHeader(0xffffffff, 1))->has_value());
  EXPECT_FALSE(PngSize(PngHeader(1, 0x80000000))->has_value());
  // Not a PNG, cut short, or no IHDR first.
  EXPECT_FALSE(PngSize("GIF89a.......................").ok());
  EXPECT_FALSE(PngSize(PngHeader(640, 480).substr(0, 20)).ok());
  EXPECT_FALSE(PngSize(std::string("\x89PNG\r\n\x1a\n", 8)).ok());
  std::string other = PngHeader(640, 480);
  other.replace(12, 4, "IDAT");
  EXPECT_FALSE(PngSize(other).ok());
  std::string long_ihdr = PngHeader(640, 480);
  long_ihdr.replace(8, 4, Be32(0xffffffff));
  EXPECT_FALSE(PngSize(long_ihdr).ok());
}

TEST(JpegSize, FindsTheFrameHeaderAndSurvivesGarbage) {
  // SOI, an APP0 segment, SOF0 (precision 8, height 0x01e0, width 0x0280).
  std::string jpeg =
      std::string("\xff\xd8\xff\xe0\x00\x04zz\xff\xc0\x00\x11\x08\x01\xe0\x02\x80", 17);
  auto s = JpegSize(jpeg);
  ASSERT_TRUE(s.ok() && s->has_value());
  EXPECT_EQ((*s)->width, 640u);
  EXPECT_EQ((*s)->height, 480u);
  EXPECT_FALSE(JpegSize("\x89PNG").ok());
  EXPECT_FALSE(JpegSize(std::string("\xff\xd8\xff\xe0\xff\xff", 6))->has_value());  // runs off
  EXPECT_FALSE(JpegSize(std::string("\xff\xd8\xff\xe0\x00\x00", 6))->has_value());  // length 0
  EXPECT_FALSE(JpegSize(std::string("\xff\xd8\xff\xc0\x00\x11\x08\x00\x00\x00\x00", 11))
                   ->has_value());  // a zero size
}

class ImageSaverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = base::MakeTempDir("/tmp", "cell_images_test_");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static CellResult Result(std::map<std::string, std::string> data) {
    CellResult r;
    r.data = std::move(data);
    return r;
  }
  static std::string Slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::string dir_;
};

TEST_F(ImageSaverTest, SavesUnderHostChosenNamesOneFilePerResult) {
  ImageSaver saver({.dir = dir_ + "/out/"});
  std::string png = PngHeader(640, 480) + "rest of the file";
  auto saved = saver.Save({Result({{"text/plain", "<Figure>"}}),
                           Result({{"image/png", Base64(png)},
                                   {"image/svg+xml", "<svg/>"},
                                   {"text/plain", "<Figure size 640x480>"}}),
                           Result({{"image/svg+xml", "<svg width='1'/>"}})});
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_EQ(saved[0].Summary(), "[image/png 640x480 saved as chart-1.png]");
  EXPECT_EQ(saved[0].path, dir_ + "/out/chart-1.png");
  EXPECT_EQ(saved[0].bytes, png.size());
  EXPECT_EQ(Slurp(saved[0].path), png);
  EXPECT_EQ(saved[1].Summary(), "[image/svg+xml saved as chart-2.svg]");
  EXPECT_EQ(Slurp(saved[1].path), "<svg width='1'/>");
  EXPECT_TRUE(saver.Wrote("chart-1.png"));
  EXPECT_FALSE(saver.Wrote("data.csv"));
}

TEST_F(ImageSaverTest, SavesOneResultAtATimeWithItsPathInTheSummary) {
  ImageSaver saver({.dir = dir_, .name_prefix = "out-3", .max_images = 1});
  EXPECT_FALSE(saver.SaveOne(Result({{"text/plain", "2"}})));
  EXPECT_FALSE(saver.full());
  auto image = saver.SaveOne(Result({{"image/png", Base64(PngHeader(2, 3))}}));
  ASSERT_TRUE(image && image->saved()) << (image ? image->note : "no image");
  EXPECT_EQ(image->Summary(/*with_path=*/true),
            "[image/png 2x3 saved to " + dir_ + "/out-3-1.png]");
  EXPECT_TRUE(saver.full());
  auto more = saver.SaveOne(Result({{"image/svg+xml", "<svg/>"}}));
  ASSERT_TRUE(more);
  EXPECT_FALSE(more->saved());
  EXPECT_EQ(more->Summary(true), "[image/svg+xml left out: more than 1 images; no more are saved]");
}

TEST(DescribeImage, ChecksLikeTheSaverButWritesNothing) {
  EXPECT_FALSE(DescribeImage(CellResult{}, 1000));
  CellResult r;
  r.data = {{"image/png", Base64(PngHeader(640, 480))}, {"image/svg+xml", "<svg/>"}};
  auto png = DescribeImage(r, 1000);
  ASSERT_TRUE(png);
  EXPECT_FALSE(png->saved());
  EXPECT_EQ(png->What(), "image/png 640x480");
  EXPECT_EQ(png->note, "");
  // A size not believed is no reason to leave it out; what the saver would refuse is.
  r.data = {{"image/png", Base64(PngHeader(0, 1))}};
  EXPECT_EQ(DescribeImage(r, 1000)->What(), "image/png");
  EXPECT_EQ(DescribeImage(r, 1000)->note, "");
  EXPECT_NE(DescribeImage(r, 10)->note.find("limit of 10 bytes"), std::string::npos);
  r.data = {{"image/jpeg", "%%%"}};
  EXPECT_NE(DescribeImage(r, 1000)->Summary().find("[image/jpeg left out: not valid base64"),
            std::string::npos);
}

TEST_F(ImageSaverTest, NeverOverwritesAFileThatIsThere) {
  std::ofstream(dir_ + "/chart-1.png") << "the user's own";
  ImageSaver saver({.dir = dir_});
  auto saved = saver.Save({Result({{"image/png", Base64(PngHeader(2, 3))}})});
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].name, "chart-2.png");
  EXPECT_EQ(Slurp(dir_ + "/chart-1.png"), "the user's own");
}

TEST_F(ImageSaverTest, HostileImagesAreLeftOutOrDoubtedWithANote) {
  ImageSaver saver({.dir = dir_, .max_image_bytes = 1000});
  auto saved = saver.Save({
      Result({{"image/png", "%%% not base64 %%%"}}),
      Result({{"image/png", Base64("GIF89a, says the png")}}),
      Result({{"image/png", Base64(PngHeader(1, 1).substr(0, 18))}}),
      Result({{"image/png", Base64(PngHeader(0xffffffff, 0xffffffff))}}),
      Result({{"image/png", Base64(std::string(2000, 'x'))}}),
      Result({{"image/jpeg", Base64("\xff\xd8 no frame")}}),
      Result({{"image/png", ""}}),
  });
  ASSERT_EQ(saved.size(), 7u);
  EXPECT_FALSE(saved[0].saved());
  EXPECT_NE(saved[0].Summary().find("[image/png left out: not valid base64"), std::string::npos);
  EXPECT_FALSE(saved[1].saved());
  EXPECT_NE(saved[1].note.find("not a PNG"), std::string::npos);
  EXPECT_FALSE(saved[2].saved());
  EXPECT_NE(saved[2].note.find("cut short"), std::string::npos);
  // A real PNG header with an impossible size: kept, its size not believed.
  ASSERT_TRUE(saved[3].saved());
  EXPECT_FALSE(saved[3].size);
  EXPECT_EQ(saved[3].Summary(),
            "[image/png saved as chart-1.png; its header gives no believable size]");
  EXPECT_FALSE(saved[4].saved());
  EXPECT_NE(saved[4].note.find("limit of 1000 bytes"), std::string::npos);
  ASSERT_TRUE(saved[5].saved());
  EXPECT_EQ(saved[5].name, "chart-2.jpg");
  EXPECT_FALSE(saved[6].saved());
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 2);
}

TEST_F(ImageSaverTest, StopsAtMaxImages) {
  ImageSaver saver({.dir = dir_, .max_images = 2});
  std::string png = Base64(PngHeader(1, 1));
  auto saved = saver.Save(
      {Result({{"image/png", png}}), Result({{"image/png", png}}), Result({{"image/png", png}})});
  ASSERT_EQ(saved.size(), 3u);
  EXPECT_TRUE(saved[1].saved());
  EXPECT_FALSE(saved[2].saved());
  EXPECT_NE(saved[2].note.find("more than 2 images"), std::string::npos);
}

TEST_F(ImageSaverTest, MakesATempDirAtTheFirstImageOnly) {
  setenv("TMPDIR", dir_.c_str(), 1);
  ImageSaverOptions options;
  options.temp_prefix = "ask-";
  ImageSaver saver(options);
  EXPECT_TRUE(saver.Save({Result({{"text/plain", "2"}})}).empty());
  EXPECT_EQ(saver.dir(), "");
  auto saved = saver.Save({Result({{"image/png", Base64(PngHeader(1, 1))}})});
  unsetenv("TMPDIR");
  ASSERT_TRUE(saved.at(0).saved()) << saved[0].note;
  EXPECT_EQ(saver.dir().rfind(dir_ + "/ask-", 0), 0u) << saver.dir();
  struct stat st;
  ASSERT_EQ(stat(saver.dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(ImageSaverTest, AnUnwritableDirectoryIsANoteNotACrash) {
  std::ofstream(dir_ + "/file") << "x";
  ImageSaver saver({.dir = dir_ + "/file/sub"});
  auto saved = saver.Save({Result({{"image/png", Base64(PngHeader(1, 1))}})});
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_FALSE(saved[0].saved());
  EXPECT_NE(saved[0].note.find("cannot make a directory"), std::string::npos);
}

}  // namespace
}  // namespace codebox::cell_images
