#include "cell_images/image_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

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

}  // namespace

std::string SavedImage::Summary() const {
  if (!saved()) return "[" + mime + " left out: " + note + "]";
  std::string line = "[" + mime;
  if (size) line += " " + std::to_string(size->width) + "x" + std::to_string(size->height);
  line += " saved as " + name;
  if (!note.empty()) line += "; " + note;
  return line + "]";
}

ImageSaver::ImageSaver(ImageSaverOptions options)
    : options_(std::move(options)), dir_(options_.dir) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();  // "out/" + "/chart-1.png"
}

Status ImageSaver::MakeDir() {
  if (dir_made_) return dir_status_;
  dir_made_ = true;
  if (dir_.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    auto made =
        base::MakeTempDir(tmp != nullptr && *tmp == '/' ? tmp : "/tmp", options_.temp_prefix);
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
    for (const ImageFormat& f : kFormats) {
      const std::string* value = r.Get(f.mime);
      if (value == nullptr) continue;
      saved.push_back(SaveOne(f, *value));
      break;
    }
  }
  return saved;
}

SavedImage ImageSaver::SaveOne(const ImageFormat& format, const std::string& value) {
  const std::string mime = format.mime;
  SavedImage image;
  image.mime = mime;
  if (count_ >= options_.max_images) {
    image.note = "more than " + std::to_string(options_.max_images) + " images; no more are saved";
    return image;
  }
  std::string data;
  if (mime == "image/svg+xml") {
    // SVG is text; only its size is checked.
    if (value.size() > options_.max_image_bytes) {
      image.note = "the image is bigger than its limit of " +
                   std::to_string(options_.max_image_bytes) + " bytes";
      return image;
    }
    data = value;
  } else {
    auto decoded = DecodeBase64(value, options_.max_image_bytes);
    if (!decoded.ok()) {
      image.note = decoded.status().message();
      return image;
    }
    data = std::move(*decoded);
    auto size = mime == "image/png" ? PngSize(data) : JpegSize(data);
    if (!size.ok()) {
      image.note = size.status().message();
      return image;
    }
    image.size = *size;
    if (!image.size) image.note = "its header gives no believable size";
  }
  if (data.empty()) {
    image.note = "the image is empty";
    return image;
  }
  if (Status s = MakeDir(); !s.ok()) {
    image.note = "cannot make a directory for images: " + s.message();
    return image;
  }
  // O_EXCL: never overwrite a file that is there (an earlier run's chart, the user's own).
  for (int tries = 0; tries < kMaxNameTries; ++tries) {
    std::string name =
        options_.name_prefix + "-" + std::to_string(next_number_++) + format.extension;
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
