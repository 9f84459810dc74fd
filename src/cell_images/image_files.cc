#include "cell_images/image_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "base/fs.h"
#include "base/io.h"
#include "base/unique_fd.h"

namespace codebox::cell_images {
namespace {

// The formats saved, best first, and the extension each file gets.
constexpr ImageFormat kFormats[] = {
    {"image/png", ".png"}, {"image/jpeg", ".jpg"}, {"image/svg+xml", ".svg"}};

// Names tried past one that exists, before giving up on a directory full of charts.
constexpr int kMaxNameTries = 10000;

// The best format `result` carries an image in, and its value; nullptr when none.
const ImageFormat* BestFormat(const CellResult& result, const std::string** value) {
  for (const ImageFormat& f : kFormats) {
    if ((*value = result.Get(f.mime)) != nullptr) return &f;
  }
  return nullptr;
}

// The bytes of an image decoded and checked; empty, with image->note saying why, when it is
// left out. Sets image->size from its header.
std::string Check(const ImageFormat& format, const std::string& value, uint64_t max_bytes,
                  SavedImage* image) {
  const std::string_view mime = format.mime;
  std::string data;
  if (mime == "image/svg+xml") {
    // SVG is text; only its size is checked.
    if (value.size() > max_bytes) {
      image->note = "the image is bigger than its limit of " + std::to_string(max_bytes) + " bytes";
      return "";
    }
    data = value;
  } else {
    auto decoded = DecodeBase64(value, max_bytes);
    if (!decoded.ok()) {
      image->note = decoded.status().message();
      return "";
    }
    data = std::move(*decoded);
    auto size = mime == "image/png" ? PngSize(data) : JpegSize(data);
    if (!size.ok()) {
      image->note = size.status().message();
      return "";
    }
    image->size = *size;
    if (!image->size) image->note = "its header gives no believable size";
  }
  if (data.empty()) image->note = "the image is empty";
  return data;
}

}  // namespace

std::string SavedImage::What() const {
  if (!size) return mime;
  return mime + " " + std::to_string(size->width) + "x" + std::to_string(size->height);
}

std::string SavedImage::Summary(bool with_path) const {
  if (!saved()) return "[" + mime + " left out: " + note + "]";
  std::string line = "[" + What() + (with_path ? " saved to " + path : " saved as " + name);
  if (!note.empty()) line += "; " + note;
  return line + "]";
}

std::optional<SavedImage> DescribeImage(const CellResult& result, uint64_t max_image_bytes) {
  const std::string* value = nullptr;
  const ImageFormat* format = BestFormat(result, &value);
  if (format == nullptr) return std::nullopt;
  SavedImage image;
  image.mime = format->mime;
  // A doubtful size is not a reason to leave it out: only such reasons are notes here.
  if (!Check(*format, *value, max_image_bytes, &image).empty()) image.note.clear();
  return image;
}

ImageSaver::ImageSaver(ImageSaverOptions options)
    : options_(std::move(options)), dir_(options_.dir) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();  // "out/" + "/chart-1.png"
}

Status ImageSaver::MakeDir() {
  if (dir_made_) return dir_status_;
  dir_made_ = true;
  if (dir_.empty()) {
    auto made = base::MakeTempDir(base::TempRoot(), options_.temp_prefix);
    if (made.ok()) dir_ = *made;
    dir_status_ = made.status();
  } else {
    dir_status_ = base::MakeDirs(dir_);
  }
  return dir_status_;
}

std::vector<SavedImage> ImageSaver::Save(const std::vector<CellResult>& results) {
  std::vector<SavedImage> saved;
  for (const CellResult& r : results) {
    if (auto image = SaveOne(r)) saved.push_back(std::move(*image));
  }
  return saved;
}

std::optional<SavedImage> ImageSaver::SaveOne(const CellResult& result) {
  const std::string* value = nullptr;
  const ImageFormat* format = BestFormat(result, &value);
  if (format == nullptr) return std::nullopt;
  SavedImage image;
  image.mime = format->mime;
  if (full()) {
    image.note = "more than " + std::to_string(options_.max_images) + " images; no more are saved";
    return image;
  }
  const std::string data = Check(*format, *value, options_.max_image_bytes, &image);
  if (data.empty()) return image;
  if (Status s = MakeDir(); !s.ok()) {
    image.note = "cannot make a directory for images: " + s.message();
    return image;
  }
  // O_EXCL: never overwrite a file that is there (an earlier run's chart, the user's own).
  for (int tries = 0; tries < kMaxNameTries; ++tries) {
    std::string name =
        options_.name_prefix + "-" + std::to_string(next_number_++) + format->extension;
    std::string path = dir_ + "/" + name;
    base::UniqueFd fd(
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd.valid() && errno == EEXIST) continue;
    if (!fd.valid()) {
      image.note = base::ErrnoStatus("create " + path).message();
      return image;
    }
    if (Status s = base::WriteAll(fd.get(), data); !s.ok()) {
      ::unlink(path.c_str());
      image.note = "write " + path + ": " + s.message();
      return image;
    }
    image.path = path;
    image.name = name;
    image.bytes = data.size();
    written_.insert(name);
    ++count_;
    return image;
  }
  image.note = "no free file name in " + dir_;
  return image;
}

}  // namespace codebox::cell_images
