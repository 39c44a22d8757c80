// sample::Regex — a subset of Python `re` syntax compiled to a DFA over Unicode code points, for
// JSON Schema `pattern` and string formats. Supported: literals, escapes (\d \w \s \D \W \S and
// punctuation), classes [...] with ranges and negation, `.`, groups (...) and (?:...), `|`,
// * + ? {n} {n,} {n,m}, ^ at the start and $ at the end. Everything else (lookaround,
// backreferences, lazy quantifiers, inline flags, anchors elsewhere) is refused. \d \w \s match
// their ASCII members only and \D \W \S ASCII non-members only: a subset of what Python matches,
// so every generated string matches. Code points that JSON must escape (" \ and controls) are
// left out of the alphabet: generation writes pattern strings without escapes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace sample {

class Regex {
 public:
  struct Transition {
    uint32_t lo, hi;  // inclusive code point range
    int32_t next;
  };
  // `search`: unanchored ends match anything (JSON Schema `pattern` semantics); otherwise the
  // whole string must match.
  static util::Result<Regex> compile(std::string_view pattern, bool search);

  int32_t start() const { return 0; }
  bool accepting(int32_t state) const { return accepting_[state] != 0; }
  // The next state on code point `cp`, or -1. Every state reached can still reach acceptance.
  int32_t step(int32_t state, uint32_t cp) const;
  // Whether some code point in [lo, hi] leads to a live state.
  bool any_in(int32_t state, uint32_t lo, uint32_t hi) const;
  bool matches(std::string_view utf8) const;  // whole-string match, for tests

 private:
  std::vector<std::vector<Transition>> transitions_;  // sorted by lo
  std::vector<uint8_t> accepting_;
};

}  // namespace sample
