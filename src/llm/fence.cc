#include "llm/fence.h"

#include <cctype>
#include <vector>

namespace codebox::llm {
namespace {

struct Block {
  std::string tag;  // lower-cased info string up to the first space
  std::string body;
};

std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

std::vector<Block> FindBlocks(std::string_view text) {
  std::vector<Block> blocks;
  int open = -1;  // index, not pointer: push_back moves the blocks
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::string_view trimmed = TrimLeft(line);
    bool fence = trimmed.substr(0, 3) == "```";
    if (open < 0 && fence) {
      std::string_view info = TrimLeft(trimmed.substr(3));
      std::string tag;
      for (char c : info) {
        if (std::isspace(static_cast<unsigned char>(c)) || c == '{') break;
        tag.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
      }
      blocks.push_back({tag, ""});
      open = static_cast<int>(blocks.size()) - 1;
    } else if (open >= 0 && fence && TrimLeft(trimmed.substr(3)).empty()) {
      open = -1;
    } else if (open >= 0) {
      blocks[open].body.append(line);
      blocks[open].body.push_back('\n');
    }
    pos = end + 1;
  }
  return blocks;
}

}  // namespace

std::optional<std::string> ExtractFencedCode(std::string_view text) {
  std::vector<Block> blocks = FindBlocks(text);
  for (const Block& b : blocks) {
    if (b.tag == "python" || b.tag == "py" || b.tag == "python3") return b.body;
  }
  for (const Block& b : blocks) {
    if (b.tag.empty()) return b.body;
  }
  return std::nullopt;
}

}  // namespace codebox::llm
