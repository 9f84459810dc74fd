// libFuzzer target: arbitrary bytes as a model's reply (its content, streamed in pieces, and
// its reasoning field) into ReadModelReply and ReplyTextStream. The model server is outside
// codebox: its replies must never crash, hang or make the loop show call markup as words.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "llm/model_reply.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace codebox::llm;
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 16;  // streamed in pieces of this many bytes
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t split = input.find('\0');
  Message message;
  message.role = "assistant";
  message.content = std::string(input.substr(0, split));
  if (split != std::string_view::npos) message.reasoning = std::string(input.substr(split + 1));

  std::string shown;
  ReplyTextStream stream([&](std::string_view t) { shown += t; }, [](std::string_view) {});
  for (size_t pos = 0; pos < message.content.size(); pos += piece) {
    stream.AddContent(std::string_view(message.content).substr(pos, piece));
  }
  stream.Finish();
  // Words shown as they stream stop at the first marker: none is ever among them.
  static constexpr std::array<std::string_view, 6> kNeverShown = {
      "<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "```", "<think>", "[THINK]"};
  for (std::string_view marker : kNeverShown) {
    if (shown.find(marker) != std::string::npos) {
      std::fprintf(stderr, "the stream showed %.*s\n", static_cast<int>(marker.size()), marker.data());
      std::abort();
    }
  }
  ModelTurn turn = ReadModelReply(message);
  (void)UnshownAnswer(turn.text, shown);
  (void)ProgramOf(turn);
  (void)DescribeEmptyReply(turn, "length");
  for (const ToolCall& call : turn.calls) (void)RunPythonCode(call);
  return 0;
}
