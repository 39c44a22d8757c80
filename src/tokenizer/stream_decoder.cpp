// StreamDecoder: emits generated text in whole UTF-8 characters only.
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace tokenizer {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Whether p[0, avail) (avail < the announced length) can still grow into a valid character.
bool valid_prefix(const uint8_t* p, size_t avail) {
  const uint8_t b0 = p[0];
  if (b0 < 0xC2 || b0 > 0xF4) return false;
  for (size_t i = 1; i < avail; ++i) {
    uint8_t lo = 0x80, hi = 0xBF;
    if (i == 1 && b0 == 0xE0) lo = 0xA0;  // the same second-byte limits decode_utf8 applies
    if (i == 1 && b0 == 0xED) hi = 0x9F;
    if (i == 1 && b0 == 0xF0) lo = 0x90;
    if (i == 1 && b0 == 0xF4) hi = 0x8F;
    if (p[i] < lo || p[i] > hi) return false;
  }
  return true;
}

}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool render_special)
    : tokenizer_(tokenizer), render_special_(render_special) {}

std::string StreamDecoder::push(int32_t id) {
  pending_ += tokenizer_.piece(id, render_special_);
  return take_complete();
}

std::string StreamDecoder::flush() {
  std::string out = take_complete();
  if (!pending_.empty()) out.append(kReplacement);  // one U+FFFD for the cut-off character
  pending_.clear();
  return out;
}

// Moves every whole character out of pending_, replacing bytes that cannot start or continue a
// character, and keeps a trailing incomplete (but so far valid) character for the next push.
std::string StreamDecoder::take_complete() {
  std::string out;
  const std::string_view p = pending_;
  const auto* bytes = reinterpret_cast<const uint8_t*>(p.data());
  size_t i = 0;
  while (i < p.size()) {
    const size_t need = utf8_sequence_length(bytes[i]);
    if (i + need > p.size()) {
      if (valid_prefix(bytes + i, p.size() - i)) break;  // wait for the rest
      out.append(kReplacement);
      ++i;
      continue;
    }
    Utf8Char c = decode_utf8(p, i);
    if (c.cp == kInvalidCodepoint) {
      out.append(kReplacement);
    } else {
      out.append(p.substr(i, c.len));
    }
    i += c.len;
  }
  pending_.erase(0, i);
  return out;
}

}  // namespace tokenizer
