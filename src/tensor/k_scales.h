// Unpacking the 6-bit sub-block scales of the K-quants (the layouts are described in blocks.h).
#pragma once

#include <cstdint>

namespace tensor {

// Scale and min of one 32-value sub-block of Q4_K / Q5_K, each 0..63.
struct KScaleMin {
  uint8_t scale;
  uint8_t min;
};

// Sub-block j (0..7) of the 12 packed bytes: the first four pairs sit in the low 6 bits of bytes
// 0..7; the last four keep their low 4 bits in bytes 8..11 and borrow the spare top 2 bits of
// bytes 0..7.
inline KScaleMin k4_scale_min(const uint8_t* scales, int j) {
  if (j < 4) {
    return {static_cast<uint8_t>(scales[j] & 63), static_cast<uint8_t>(scales[j + 4] & 63)};
  }
  return {static_cast<uint8_t>((scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4)),
          static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4))};
}

// Scale s (0..15) of a Q3_K block, 0..63 (the caller subtracts the bias 32): low 4 bits from the
// nibbles of bytes 0..7, top 2 bits from bytes 8..11.
inline int q3_k_scale(const uint8_t* scales, int s) {
  const int low = s < 8 ? scales[s] & 0x0f : scales[s - 8] >> 4;
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 0x3;
  return low | (high << 4);
}

}  // namespace tensor
