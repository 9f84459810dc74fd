// Saving the images a cell returns (charts from plt.show(), display(Image(...))) as host
// files. The host picks every name (chart-1.png, chart-2.png, ...), never takes one from the
// box and never overwrites a file; each image is decoded and checked first, and one that is
// broken, lying or too big is left out with a note saying why, never a crash. Used by
// `codebox ask`, `codebox repl` and `codebox run --session`.
#ifndef CODEBOX_CELL_IMAGES_IMAGE_FILES_H_
#define CODEBOX_CELL_IMAGES_IMAGE_FILES_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cell_images/image_data.h"
#include "codebox/execution.h"

namespace codebox::cell_images {

// One image of a cell as the host saved it, or why it did not.
struct SavedImage {
  std::string mime;               // "image/png", "image/jpeg", "image/svg+xml"
  std::string path;               // the host file written; empty when left out
  std::string name;               // its file name in the directory ("chart-1.png")
  std::optional<PixelSize> size;  // from its header, when it has a believable one
  uint64_t bytes = 0;             // bytes written
  std::string note;               // why it was left out, or what was odd about it

  bool saved() const { return !path.empty(); }
  // "image/png 640x480", or just the MIME type when the size is not known.
  std::string What() const;
  // One line for people and models: "[image/png 640x480 saved as chart-1.png]", or
  // "[image/png left out: not valid base64 (...)]". with_path: "saved to PATH" (for a
  // terminal, where the directory is not said elsewhere).
  std::string Summary(bool with_path = false) const;
};

struct ImageFormat {
  const char* mime;
  const char* extension;  // of the files saved in it
};

// The image in `result`, in its best format (image/png, else image/jpeg, else image/svg+xml),
// decoded and checked as ImageSaver would but never written: mime and size (when believable),
// and a note only when it would be left out, saying why. nullopt when the result carries no
// image.
std::optional<SavedImage> DescribeImage(const CellResult& result, uint64_t max_image_bytes);

struct ImageSaverOptions {
  std::string dir;  // empty: a fresh directory under $TMPDIR (or /tmp), made at the first image
  std::string temp_prefix = "codebox-images-";
  std::string name_prefix = "chart";
  uint64_t max_image_bytes = 32u << 20;  // decoded, per image
  int max_images = 100;                  // per saver: a cell cannot fill the disk with files
};

class ImageSaver {
 public:
  explicit ImageSaver(ImageSaverOptions options);

  // Saves the images among `results`, one file per result: its image/png, else image/jpeg,
  // else image/svg+xml (a chart often comes in more than one format). Results without an
  // image give nothing.
  std::vector<SavedImage> Save(const std::vector<CellResult>& results);
  // The same for one result; nullopt when it carries no image.
  std::optional<SavedImage> SaveOne(const CellResult& result);

  // Whether max_images are saved already (what comes next is left out with a note).
  bool full() const { return count_ >= options_.max_images; }

  // Where images go; empty until the first image is saved when no directory was given.
  const std::string& dir() const { return dir_; }
  // Whether this saver wrote a file named `name` in dir().
  bool Wrote(const std::string& name) const { return written_.count(name) > 0; }

 private:
  Status MakeDir();

  ImageSaverOptions options_;
  std::string dir_;
  Status dir_status_;
  bool dir_made_ = false;
  int next_number_ = 1;
  int count_ = 0;
  std::set<std::string> written_;
};

}  // namespace codebox::cell_images

#endif  // CODEBOX_CELL_IMAGES_IMAGE_FILES_H_
