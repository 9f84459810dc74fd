// Taking the program out of a model's prose reply, for servers without tool calling.
#ifndef CODEBOX_LLM_FENCE_H_
#define CODEBOX_LLM_FENCE_H_

#include <optional>
#include <string>
#include <string_view>

namespace codebox::llm {

// The body of the first ```python (or ```py, ```python3) block of text; failing that, the
// first bare ``` block. Blocks tagged with another language (```bash, ```text) are not code
// to run. A block the reply never closes runs to the end of the text (a reply cut short).
// nullopt when there is none.
std::optional<std::string> ExtractFencedCode(std::string_view text);

}  // namespace codebox::llm

#endif  // CODEBOX_LLM_FENCE_H_
