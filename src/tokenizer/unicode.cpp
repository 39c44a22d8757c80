// UTF-8 decoding, code point class lookup and BERT normalization helpers over the generated tables.
#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>
#include <memory>

namespace tokenizer {
namespace {

// Direct table for the Basic Multilingual Plane, where nearly all text lives; binary search
// over the ranges for the rest.
const std::array<uint16_t, 0x10000>& bmp_flags() {
  static const auto table = [] {
    auto t = std::make_unique<std::array<uint16_t, 0x10000>>();
    for (size_t i = 0; i < kFlagRangesSize && kFlagRanges[i].first < 0x10000; ++i) {
      uint32_t last = std::min<uint32_t>(kFlagRanges[i].last, 0xFFFF);
      for (uint32_t cp = kFlagRanges[i].first; cp <= last; ++cp) (*t)[cp] = kFlagRanges[i].flags;
    }
    return t;
  }();
  return *table;
}

const CodepointMapping* find_mapping(const CodepointMapping* table, size_t size, uint32_t cp) {
  const CodepointMapping* end = table + size;
  const CodepointMapping* it = std::lower_bound(
      table, end, cp, [](const CodepointMapping& m, uint32_t value) { return m.cp < value; });
  return it != end && it->cp == cp ? it : nullptr;
}

struct Gpt2ByteMap {
  std::array<uint32_t, 256> to_char{};
  std::array<int16_t, 512> to_byte{};  // every mapped character is below U+0200
};

const Gpt2ByteMap& gpt2_byte_map() {
  static const Gpt2ByteMap map = [] {
    Gpt2ByteMap m;
    m.to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      m.to_char[b] = printable ? static_cast<uint32_t>(b) : next++;
      m.to_byte[m.to_char[b]] = static_cast<int16_t>(b);
    }
    return m;
  }();
  return map;
}

}  // namespace

Utf8Char decode_utf8(std::string_view s, size_t pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + pos;
  const size_t avail = s.size() - pos;
  const uint8_t b0 = p[0];
  if (b0 < 0x80) return {b0, 1};
  const uint32_t n = utf8_sequence_length(b0);
  if (n == 1 || b0 < 0xC2 || avail < n) return {kInvalidCodepoint, 1};
  // The second byte's valid range excludes overlong forms, surrogates and values past U+10FFFF.
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 == 0xE0) lo = 0xA0;
  if (b0 == 0xED) hi = 0x9F;
  if (b0 == 0xF0) lo = 0x90;
  if (b0 == 0xF4) hi = 0x8F;
  if (b0 > 0xF4) return {kInvalidCodepoint, 1};
  if (p[1] < lo || p[1] > hi) return {kInvalidCodepoint, 1};
  uint32_t cp = b0 & (0x7F >> n);
  for (uint32_t i = 1; i < n; ++i) {
    if ((p[i] & 0xC0) != 0x80) return {kInvalidCodepoint, 1};
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  return {cp, n};
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x110000) {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += "\xEF\xBF\xBD";  // U+FFFD for anything that is not a code point
  }
}

uint16_t codepoint_flags(uint32_t cp) {
  if (cp < 0x10000) return bmp_flags()[cp];
  if (cp >= 0x110000) return kSymbol;
  const FlagRange* end = kFlagRanges + kFlagRangesSize;
  const FlagRange* it = std::upper_bound(
      kFlagRanges, end, cp, [](uint32_t value, const FlagRange& r) { return value < r.first; });
  return (it - 1)->flags;
}

void append_stripped_decomposition(uint32_t cp, std::vector<uint32_t>& out) {
  // Hangul syllables decompose arithmetically into conjoining jamo (Unicode §3.12).
  constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
  constexpr uint32_t kVCount = 21, kTCount = 28, kSCount = 11172;
  if (cp >= kSBase && cp < kSBase + kSCount) {
    uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / (kVCount * kTCount));
    out.push_back(kVBase + (s % (kVCount * kTCount)) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const CodepointMapping* m = find_mapping(kStripAccents, kStripAccentsSize, cp);
  if (!m) {
    out.push_back(cp);
    return;
  }
  out.insert(out.end(), kStripAccentsData + m->offset, kStripAccentsData + m->offset + m->length);
}

void append_lowercase(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp < 0x80) {
    out.push_back(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    return;
  }
  const CodepointMapping* m = find_mapping(kLowercase, kLowercaseSize, cp);
  if (!m) {
    out.push_back(cp);
    return;
  }
  out.insert(out.end(), kLowercaseData + m->offset, kLowercaseData + m->offset + m->length);
}

uint32_t byte_to_gpt2_char(uint8_t byte) {
  return gpt2_byte_map().to_char[byte];
}

int gpt2_char_to_byte(uint32_t cp) {
  return cp < 512 ? gpt2_byte_map().to_byte[cp] : -1;
}

}  // namespace tokenizer
