// libFuzzer target: arbitrary bytes into the frame decoder and the control-message parser.
// Must never crash, hang or grow memory without bound.
#include <cstddef>
#include <cstdint>

#include "protocol/frame.h"
#include "protocol/message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace codebox::protocol;
  FrameDecoder decoder(64 * 1024);
  std::string_view input(reinterpret_cast<const char*>(data), size);
  // Feed in uneven pieces so partial-header and partial-payload paths are exercised.
  size_t pos = 0, step = 1;
  while (pos < input.size()) {
    size_t n = std::min(step, input.size() - pos);
    decoder.Feed(input.substr(pos, n));
    pos += n;
    step = step * 3 + 1;
    for (;;) {
      auto frame = decoder.Next();
      if (!frame.ok() || !frame->has_value()) break;
      const Frame& f = **frame;
      if (f.type == FrameType::kControl || f.type == FrameType::kHello) {
        auto msg = ParseControl(f.payload);
        if (msg.ok()) {
          (void)GetString(*msg, "op");
          (void)GetInt(*msg, "timeout_ms", 0);
          (void)DumpControl(*msg);
        }
      }
    }
  }
  (void)decoder.CheckEndOfStream();
  return 0;
}
