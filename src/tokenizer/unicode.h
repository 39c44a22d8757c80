// UTF-8 decoding that never fails, code point classes, and the normalizations tokenizers need.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/unicode_data.h"

namespace tokenizer {

// Stands for a byte that does not start a valid UTF-8 sequence. It is classed as a symbol (like
// U+FFFD) so that every byte string splits somewhere; callers keep the original bytes.
constexpr uint32_t kInvalidCodepoint = 0xFFFFFFFF;

struct Utf8Char {
  uint32_t cp;   // kInvalidCodepoint for an invalid byte
  uint32_t len;  // bytes consumed, 1..4; an invalid byte consumes 1
};

// Decodes the character starting at s[pos] (pos < s.size()). Rejects overlong forms,
// surrogates and values past U+10FFFF, each as one invalid byte.
Utf8Char decode_utf8(std::string_view s, size_t pos);

// Length of the UTF-8 sequence a lead byte announces (1 for ASCII and for invalid lead bytes).
inline uint32_t utf8_sequence_length(uint8_t lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF8) return 4;
  return 1;
}

void append_utf8(std::string& out, uint32_t cp);

// The CodepointFlag bits of a code point (kInvalidCodepoint: kSymbol).
uint16_t codepoint_flags(uint32_t cp);

// Appends cp's canonical decomposition without nonspacing marks (BERT's strip_accents).
void append_stripped_decomposition(uint32_t cp, std::vector<uint32_t>& out);
// Appends the full lowercase mapping of cp.
void append_lowercase(uint32_t cp, std::vector<uint32_t>& out);

// GPT-2's reversible byte-to-character map: printable bytes map to themselves, the others to
// U+0100 upwards, so byte-level BPE vocabularies hold only printable characters.
uint32_t byte_to_gpt2_char(uint8_t byte);
// The inverse; -1 for a character that stands for no byte.
int gpt2_char_to_byte(uint32_t cp);

}  // namespace tokenizer
