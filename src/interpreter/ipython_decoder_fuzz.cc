// libFuzzer target: arbitrary bytes as the kernel's protocol stream (what a cell can write to
// the protocol fd) into KernelDecoder. Must never crash, hang or keep more than the cell's
// cap; output of the cell stays within it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "interpreter/ipython_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace codebox::interpreter;
  if (size == 0) return 0;
  const uint64_t cap = 1 + data[0] * 64u;  // small caps reach the truncation paths
  KernelDecoder decoder(cap);
  (void)decoder.Feed("{\"type\":\"ready\",\"protocol\":1}\n");
  decoder.BeginCell(1);
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t pos = 0, step = 1;
  while (pos < input.size()) {
    size_t n = std::min(step, input.size() - pos);
    if (!decoder.Feed(input.substr(pos, n)).ok()) break;
    pos += n;
    step = step * 3 + 1;
    (void)decoder.TakeEmits();
  }
  const codebox::Execution& e = decoder.execution();
  uint64_t used = 0;
  for (const std::string& c : e.stdout_chunks) used += c.size();
  for (const std::string& c : e.stderr_chunks) used += c.size();
  for (const codebox::CellResult& r : e.results) {
    for (const auto& [mime, value] : r.data) used += mime.size() + value.size();
  }
  if (used > cap) std::abort();  // the per-cell cap leaked
  return 0;
}
