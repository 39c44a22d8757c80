// SpecialTokens: finds control and user-defined token texts in raw text, leftmost-longest.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/flat_map.h"
#include "tokenizer/vocab.h"

namespace tokenizer {

// A stretch of the input: either a special token or plain text [begin, end).
struct Fragment {
  int32_t token;  // kNoToken for plain text
  size_t begin;
  size_t end;
};

// A byte trie over the texts of control, unknown and user-defined tokens. Leftmost-longest
// matching is what HF tokenizers does for added tokens (llama.cpp matches longest token first
// over the whole text, which differs only when two special texts overlap).
class SpecialTokens {
 public:
  explicit SpecialTokens(const Vocab& vocab);

  // Splits text into special tokens and the plain text between them. User-defined tokens always
  // match; control and unknown tokens only when parse_special.
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;

 private:
  void add(std::string_view text, int32_t id, bool always);

  FlatMap<int32_t> edges_;                 // (node << 8 | byte) -> child node; node 0 is the root
  std::vector<int32_t> token_;             // token ending at each node, or kNoToken
  std::vector<uint8_t> always_;            // whether that token matches without parse_special
  std::array<uint8_t, 256> first_byte_{};  // bit 0: an always-token starts here; bit 1: any
};

}  // namespace tokenizer
