// Word wrapping for terminal output: lines a person reads without scrolling sideways.
#pragma once

#include <string>
#include <string_view>

namespace util {

// `text` broken at spaces into lines of at most `width` columns (counting UTF-8 code points), the
// first prefixed by `first`, the rest by `rest`; each line ends in '\n'. A word longer than a
// line stays whole on its own line.
std::string wrap(std::string_view text, size_t width, std::string_view first = "",
                 std::string_view rest = "");

}  // namespace util
