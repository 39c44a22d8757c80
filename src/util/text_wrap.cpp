#include "util/text_wrap.h"

namespace util {
namespace {

size_t columns(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;  // count lead bytes, not continuations
  return n;
}

}  // namespace

std::string wrap(std::string_view text, size_t width, std::string_view first,
                 std::string_view rest) {
  std::string out(first), line;
  size_t line_cols = columns(first);
  auto flush = [&] {
    out += line + "\n";
    line.clear();
    out += rest;
    line_cols = columns(rest);
  };
  size_t at = 0;
  bool at_line_start = true;
  while (at < text.size()) {
    const size_t space = text.find(' ', at);
    const std::string_view word =
        text.substr(at, space == std::string_view::npos ? std::string_view::npos : space - at);
    at = space == std::string_view::npos ? text.size() : space + 1;
    if (word.empty()) continue;
    const size_t cols = columns(word);
    if (!at_line_start && line_cols + 1 + cols > width) {
      flush();
      at_line_start = true;
    }
    if (!at_line_start) {
      line += ' ';
      ++line_cols;
    }
    line += word;
    line_cols += cols;
    at_line_start = false;
  }
  return out + line + "\n";
}

}  // namespace util
