// LocalBoxSource: the boxes of `codebox mcp`, made in this process (or on the codebox server
// the options name) with Box::Create.
#include "base/log.h"
#include "mcp/session.h"

namespace codebox::mcp {
namespace {

class LocalSource final : public BoxSource {
 public:
  explicit LocalSource(BoxOptions options) : options_(std::move(options)) {}

  StatusOr<std::shared_ptr<Box>> Open() override {
    auto box = Box::Create(options_);
    if (!box.ok()) return box.status();
    return std::shared_ptr<Box>(std::move(*box));
  }

  void Close(std::shared_ptr<Box> box) override {
    if (!box) return;
    if (Status s = box->Destroy(); !s.ok()) {
      CODEBOX_LOG(kWarn, "mcp: destroying the session's box: " << s.message());
    }
  }

 private:
  const BoxOptions options_;
};

}  // namespace

std::unique_ptr<BoxSource> LocalBoxSource(BoxOptions options) {
  return std::make_unique<LocalSource>(std::move(options));
}

}  // namespace codebox::mcp
