// Declarations of the generated Unicode tables (unicode_data.cpp, from
// tools/gen_unicode_tables.py).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tokenizer {

// Code point classes; a code point has exactly one category bit, plus kWhitespace if it has the
// Unicode White_Space property.
enum CodepointFlag : uint16_t {
  kLetter = 1 << 0,       // L*
  kNumber = 1 << 1,       // N*
  kPunctuation = 1 << 2,  // P*
  kSymbol = 1 << 3,       // S*
  kMark = 1 << 4,         // M*
  kControl = 1 << 5,      // Cc, Cf, Co, Cs
  kSeparator = 1 << 6,    // Z*
  kUnassigned = 1 << 7,   // Cn
  kWhitespace = 1 << 8,   // White_Space property
};

// Code points first..last (inclusive) share `flags`. Sorted, contiguous, covering 0..0x10FFFF.
struct FlagRange {
  uint32_t first;
  uint32_t last;
  uint16_t flags;
};

// Code point `cp` maps to data[offset .. offset + length) (length 0: the code point is dropped).
struct CodepointMapping {
  uint32_t cp;
  uint32_t offset;
  uint32_t length;
};

extern const char kUnicodeVersion[];
extern const FlagRange kFlagRanges[];
extern const size_t kFlagRangesSize;
// NFD with nonspacing marks removed (BERT's strip_accents), Hangul syllables excluded.
extern const CodepointMapping kStripAccents[];
extern const size_t kStripAccentsSize;
extern const uint32_t kStripAccentsData[];
// Full lowercase mapping.
extern const CodepointMapping kLowercase[];
extern const size_t kLowercaseSize;
extern const uint32_t kLowercaseData[];

}  // namespace tokenizer
