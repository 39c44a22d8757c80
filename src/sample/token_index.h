// The vocabulary as the constraints walk it: every token's bytes, sorted so that tokens sharing a
// prefix are neighbours, and the walk that finds which tokens an automaton can take. Internal to
// sample/ (constraint.cpp, tool_constraint.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace sample {

struct TokenWalk {
  std::vector<int32_t> ids;   // sorted by bytes
  std::vector<uint32_t> lcp;  // common prefix length with the previous entry
};

struct TokenIndex {
  int32_t n_vocab = 0;
  size_t max_bytes = 0;
  std::vector<std::string> bytes;  // empty: never part of the text (control, end, unused tokens)
  std::vector<int32_t>
      plain_chars;                 // code points when the token is whole plain characters, else -1
  std::vector<uint8_t> has_angle;  // the token's bytes contain '<' (markers start with it)
  std::vector<uint8_t> end_of_generation;  // tokens that end the reply
  TokenWalk all, not_plain, with_angle, not_plain_or_angle;
};

struct TokenIndexOptions {
  // Also walk user-defined tokens (Gemma 4's <|"|>, <|tool_call>, ...): tool-call syntax is
  // written with them. JSON documents are not.
  bool user_defined = false;
  // Tokens that end the reply besides end of generation (Gemma 4's <|tool_response>).
  std::vector<int32_t> extra_end_ids;
};

// One index per vocabulary and options, shared by every constraint compiled for it while any is
// alive.
std::shared_ptr<const TokenIndex> shared_token_index(const tokenizer::Tokenizer& tokenizer,
                                                     const TokenIndexOptions& options = {});

// Code points of `s` when it is valid UTF-8 with no " \ or control character; -1 otherwise.
int32_t plain_char_count(std::string_view s);

// Marks in `allowed` every token of `walk` whose bytes State can take from levels[0]. levels has
// max_bytes + 1 entries; entry d + 1 is fed from entry d by State::feed_from(const State&,
// uint8_t), so tokens sharing a prefix are fed it once, and a prefix refused skips every token
// under it.
template <class State>
void walk_tokens(const TokenIndex& index, const TokenWalk& walk, std::vector<State>& levels,
                 std::vector<uint8_t>& allowed) {
  size_t valid = 0;  // levels[0..valid] hold the states after the previous token's prefix
  size_t dead_depth = SIZE_MAX;
  for (size_t i = 0; i < walk.ids.size(); ++i) {
    const size_t common = walk.lcp[i];
    if (common >= dead_depth) continue;  // under a prefix already refused
    dead_depth = SIZE_MAX;
    const int32_t id = walk.ids[i];
    const std::string& bytes = index.bytes[id];
    size_t depth = std::min(common, valid);
    for (; depth < bytes.size(); ++depth) {
      if (!levels[depth + 1].feed_from(levels[depth], static_cast<uint8_t>(bytes[depth]))) {
        dead_depth = depth + 1;
        break;
      }
    }
    valid = depth;
    if (depth == bytes.size()) allowed[id] = 1;
  }
}

}  // namespace sample
