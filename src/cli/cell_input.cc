#include "cli/cell_input.h"

#include <algorithm>
#include <string>

namespace codebox::cli {
namespace {

// Python's compound statements whose header may carry its body on the same line
// (`if x: y`), after which the interactive interpreter still waits for an empty line.
// `match` and `case` are soft keywords (`match = 1` is an assignment): they count by their
// trailing colon only.
constexpr std::string_view kBlockKeywords[] = {"if",    "elif",   "else",    "for",
                                               "while", "def",    "class",   "with",
                                               "try",   "except", "finally", "async"};

bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}

struct Scan {
  int depth = 0;                // open brackets
  bool open_triple = false;     // inside a """ or ''' string
  bool open_string = false;     // inside a '...' string continued by a backslash-newline
  bool line_continues = false;  // the last line ends in a backslash outside any string
  bool block = false;           // a compound statement or decorator was seen
  bool broken = false;          // an error no further line can mend
};

Scan ScanCell(std::string_view s) {
  Scan st;
  char quote = 0;  // the quote character of the string we are in, or 0
  bool triple = false;
  bool line_start = true;  // only whitespace so far on this logical line
  char last = 0;           // last significant character of this logical line
  auto end_logical_line = [&] {
    if (last == ':') st.block = true;
    last = 0;
    line_start = true;
  };
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (quote != 0) {
      if (c == '\\') {  // an escape (raw strings too cannot end at \"), or \-newline
        if (i + 1 == s.size() && !triple) st.open_string = true;
        i += 2;
        continue;
      }
      if (c == '\n' && !triple) {  // an unterminated '...' string: a syntax error
        st.broken = true;
        quote = 0;
        end_logical_line();
      } else if (c == quote && (!triple || s.substr(i, 3) == std::string(3, quote))) {
        i += triple ? 3 : 1;
        quote = 0;
        continue;
      }
      ++i;
      continue;
    }
    if (c == '#') {
      while (i < s.size() && s[i] != '\n') ++i;
      continue;
    }
    if (c == '\\') {
      if (i + 1 == s.size()) st.line_continues = true;
      i += 2;  // a backslash-newline joins the lines
      continue;
    }
    if (c == '\n') {
      if (st.depth == 0) end_logical_line();
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
      ++i;
      continue;
    }
    if (c == '"' || c == '\'') {
      triple = s.substr(i, 3) == std::string(3, c);
      quote = c;
      i += triple ? 3 : 1;
      last = c;
      line_start = false;
      continue;
    }
    if (IsWordChar(c)) {
      size_t end = i;
      while (end < s.size() && IsWordChar(s[end])) ++end;
      std::string_view word = s.substr(i, end - i);
      if (line_start && std::find(std::begin(kBlockKeywords), std::end(kBlockKeywords), word) !=
                            std::end(kBlockKeywords)) {
        st.block = true;
      }
      last = s[end - 1];
      line_start = false;
      i = end;
      continue;
    }
    if (line_start && c == '@') st.block = true;  // a decorator: the def follows
    if (c == '(' || c == '[' || c == '{') {
      ++st.depth;
    } else if (c == ')' || c == ']' || c == '}') {
      if (st.depth == 0) st.broken = true;
      st.depth = std::max(0, st.depth - 1);
    }
    last = c;
    line_start = false;
    ++i;
  }
  if (quote != 0) {
    if (triple) {
      st.open_triple = true;
    } else if (!st.open_string) {
      st.broken = true;  // 'abc at the end of the cell
    }
  } else if (st.depth == 0) {
    end_logical_line();
  }
  return st;
}

bool LastLineBlank(std::string_view cell) {
  size_t nl = cell.rfind('\n');
  std::string_view line = nl == std::string_view::npos ? cell : cell.substr(nl + 1);
  return line.find_first_not_of(" \t\r\f") == std::string_view::npos;
}

}  // namespace

bool NeedsMoreInput(std::string_view cell) {
  const Scan st = ScanCell(cell);
  if (st.open_triple || st.open_string) return true;
  if (st.broken) return false;
  if (st.depth > 0 || st.line_continues) return true;
  return st.block && !LastLineBlank(cell);
}

bool IsExitCommand(std::string_view cell) {
  std::string word;
  for (char c : cell) {
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') word.push_back(c);
  }
  return word == "exit" || word == "quit" || word == "exit()" || word == "quit()";
}

}  // namespace codebox::cli
