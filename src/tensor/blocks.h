// Block layouts of the GGUF quantized tensor types, byte for byte as the files store them.
//
// Each struct is one block: `kValues` consecutive values of a row (a row always starts a new
// block). Scales marked "f16" are IEEE half-precision bit patterns (see tensor/fp16.h). All
// multi-byte fields are little-endian, as GGUF is. The structs hold only fixed-size integer
// fields so they mean the same on the host and in CUDA code, and so their sizes are fixed by
// the static_asserts below (tests/tensor/blocks_test.cpp checks them against gguf's table).
//
// Vocabulary of the comments: "q" is the stored integer of a value, "x" the value rebuilt from
// it; bits per weight (bpw) counts the scales too.
#pragma once

#include <cstdint>

namespace tensor {

// Values in one K-quant super-block (ggml's QK_K). Its sub-blocks of 16 or 32 values each have
// their own small integer scale, itself scaled by the super-block's f16 scale.
inline constexpr int kSuperBlockValues = 256;

// --- Simple 32-value blocks -------------------------------------------------------------------

// Q4_0: 32 values, x = d * (q - 8), q in 0..15. 4.5 bpw.
// Byte j of qs holds value j in its low nibble and value j + 16 in its high nibble.
struct BlockQ4_0 {
  static constexpr int kValues = 32;
  uint16_t d;      // scale, f16
  uint8_t qs[16];  // nibbles, see above
};
static_assert(sizeof(BlockQ4_0) == 18, "BlockQ4_0 must be 18 bytes, as in GGUF files");

// Q4_1: 32 values, x = d * q + m, q in 0..15. 5 bpw. Nibble order as Q4_0.
struct BlockQ4_1 {
  static constexpr int kValues = 32;
  uint16_t d;  // scale, f16
  uint16_t m;  // offset (the block minimum), f16
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20, "BlockQ4_1 must be 20 bytes, as in GGUF files");

// Q5_0: 32 values, x = d * (q - 16), q in 0..31. 5.5 bpw.
// The low 4 bits of q are stored as in Q4_0; bit j of the little-endian u32 in qh is bit 4 of
// value j.
struct BlockQ5_0 {
  static constexpr int kValues = 32;
  uint16_t d;      // scale, f16
  uint8_t qh[4];   // fifth bits, one per value (a u32 stored as bytes: only 2-byte aligned)
  uint8_t qs[16];  // low nibbles
};
static_assert(sizeof(BlockQ5_0) == 22, "BlockQ5_0 must be 22 bytes, as in GGUF files");

// Q5_1: 32 values, x = d * q + m, q in 0..31. 6 bpw. Bits stored as in Q5_0.
struct BlockQ5_1 {
  static constexpr int kValues = 32;
  uint16_t d;  // scale, f16
  uint16_t m;  // offset (the block minimum), f16
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24, "BlockQ5_1 must be 24 bytes, as in GGUF files");

// Q8_0: 32 values, x = d * q, q in -127..127. 8.5 bpw. Also the activation partner of
// Q4_0/Q5_0/Q8_0 dot products.
struct BlockQ8_0 {
  static constexpr int kValues = 32;
  uint16_t d;  // scale, f16
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34, "BlockQ8_0 must be 34 bytes, as in GGUF files");

// Q8_1: 32 values, x = d * q, plus s = d * sum(q) precomputed so that dot products with the
// offset types (Q4_1, Q5_1) can add the offset term once per block. 9 bpw. Activations only;
// no file type stores it.
struct BlockQ8_1 {
  static constexpr int kValues = 32;
  uint16_t d;  // scale, f16
  uint16_t s;  // d * sum(qs), f16
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_1) == 36, "BlockQ8_1 must be 36 bytes, as in GGUF files");

// --- K-quants: 256-value super-blocks ---------------------------------------------------------

// Q2_K: 16 sub-blocks of 16 values, x = d * sc * q - dmin * m, q in 0..3, where sc and m are the
// low and high nibble of scales[sub-block]. 2.625 bpw.
// qs: the super-block is two halves of 128 values; in half h, byte l of qs[32h .. 32h+31] holds
// values 128h + l + 32k in bits 2k..2k+1, for k = 0..3.
struct BlockQ2_K {
  static constexpr int kValues = kSuperBlockValues;
  uint8_t scales[16];  // per sub-block: scale (low nibble) and min (high nibble)
  uint8_t qs[64];      // 2-bit quants
  uint16_t d;          // super-block scale of the scales, f16
  uint16_t dmin;       // super-block scale of the mins, f16
};
static_assert(sizeof(BlockQ2_K) == 84, "BlockQ2_K must be 84 bytes, as in GGUF files");

// Q3_K: 16 sub-blocks of 16 values, x = d * (sc - 32) * (q - 4), q in 0..7, sc in 0..63.
// 3.4375 bpw.
// The low two bits of q are packed as in Q2_K; the third bit of value i is bit i / 32 of
// hmask[i % 32]. Scale s (6 bits): low 4 bits are the low nibble of scales[s] (s < 8) or the high
// nibble of scales[s - 8] (s >= 8); the top 2 bits are bits 2*(s/4)..+1 of scales[8 + s % 4].
struct BlockQ3_K {
  static constexpr int kValues = kSuperBlockValues;
  uint8_t hmask[32];   // third bit of each quant
  uint8_t qs[64];      // low 2 bits of each quant
  uint8_t scales[12];  // 16 6-bit scales, packed as described above
  uint16_t d;          // super-block scale, f16
};
static_assert(sizeof(BlockQ3_K) == 110, "BlockQ3_K must be 110 bytes, as in GGUF files");

// Q4_K: 8 sub-blocks of 32 values, x = d * sc * q - dmin * m, q in 0..15, sc and m in 0..63.
// 4.5 bpw.
// scales packs 8 (sc, m) pairs of 6 bits: for j < 4, sc = scales[j] & 63 and m = scales[j+4] & 63;
// for j >= 4, the low 4 bits come from the nibbles of scales[j+4] (sc low, m high) and the top
// 2 bits from bits 6..7 of scales[j-4] (sc) and scales[j] (m).
// qs: 64-value chunks c = 0..3 use qs[32c .. 32c+31]; byte l holds value 64c + l (low nibble)
// and value 64c + 32 + l (high nibble).
struct BlockQ4_K {
  static constexpr int kValues = kSuperBlockValues;
  uint16_t d;          // super-block scale of the scales, f16
  uint16_t dmin;       // super-block scale of the mins, f16
  uint8_t scales[12];  // 8 scales and 8 mins, 6 bits each
  uint8_t qs[128];     // 4-bit quants
};
static_assert(sizeof(BlockQ4_K) == 144, "BlockQ4_K must be 144 bytes, as in GGUF files");

// Q5_K: as Q4_K with a fifth bit per quant, q in 0..31. 5.5 bpw.
// The fifth bit of value 64c + l is bit 2c of qh[l], of value 64c + 32 + l bit 2c + 1.
struct BlockQ5_K {
  static constexpr int kValues = kSuperBlockValues;
  uint16_t d;          // super-block scale of the scales, f16
  uint16_t dmin;       // super-block scale of the mins, f16
  uint8_t scales[12];  // packed as in Q4_K
  uint8_t qh[32];      // fifth bits
  uint8_t qs[128];     // low 4 bits, packed as in Q4_K
};
static_assert(sizeof(BlockQ5_K) == 176, "BlockQ5_K must be 176 bytes, as in GGUF files");

// Q6_K: 16 sub-blocks of 16 values, x = d * sc * (q - 32), q in 0..63, sc a signed 8-bit scale.
// 6.5625 bpw.
// Two halves of 128 values; half h uses ql[64h ..], qh[32h ..] and scales[8h ..]. Within a half,
// for l = 0..31: value l     = low nibble of ql[l]      | bits 0..1 of qh[l] << 4,
//                value l+32  = low nibble of ql[l+32]   | bits 2..3 of qh[l] << 4,
//                value l+64  = high nibble of ql[l]     | bits 4..5 of qh[l] << 4,
//                value l+96  = high nibble of ql[l+32]  | bits 6..7 of qh[l] << 4.
struct BlockQ6_K {
  static constexpr int kValues = kSuperBlockValues;
  uint8_t ql[128];    // low 4 bits
  uint8_t qh[64];     // high 2 bits
  int8_t scales[16];  // per sub-block scale
  uint16_t d;         // super-block scale, f16
};
static_assert(sizeof(BlockQ6_K) == 210, "BlockQ6_K must be 210 bytes, as in GGUF files");

// Q8_K: 256 values, x = d * q, q in -127..127, with the sum of each 16 quants precomputed (the
// K-quant dot products need them for the min/offset terms). Activations only; no file stores it.
struct BlockQ8_K {
  static constexpr int kValues = kSuperBlockValues;
  float d;  // scale, f32 (not f16: activations need the range)
  int8_t qs[256];
  int16_t bsums[16];  // bsums[k] = sum of qs[16k .. 16k+15]
};
static_assert(sizeof(BlockQ8_K) == 292, "BlockQ8_K must be 292 bytes, as in GGUF files");

// --- Non-linear 4-bit codebooks ---------------------------------------------------------------

// The 16 levels of IQ4_NL / IQ4_XS: denser near zero, where trained weights cluster.
inline constexpr int8_t kIq4NlLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// IQ4_NL: 32 values, x = d * kIq4NlLevels[q], q in 0..15. 4.5 bpw. Nibble order as Q4_0.
struct BlockIQ4_NL {
  static constexpr int kValues = 32;
  uint16_t d;  // scale, f16
  uint8_t qs[16];
};
static_assert(sizeof(BlockIQ4_NL) == 18, "BlockIQ4_NL must be 18 bytes, as in GGUF files");

// IQ4_XS: 8 sub-blocks of 32 values, x = d * (ls - 32) * kIq4NlLevels[q], ls a 6-bit scale.
// 4.25 bpw. Scale of sub-block b: low 4 bits = nibble b % 2 of scales_l[b / 2], high 2 bits =
// bits 2b..2b+1 of scales_h. Sub-block b's quants are qs[16b .. 16b+15], nibble order as Q4_0.
struct BlockIQ4_XS {
  static constexpr int kValues = kSuperBlockValues;
  uint16_t d;           // super-block scale, f16
  uint16_t scales_h;    // high 2 bits of the 8 sub-block scales
  uint8_t scales_l[4];  // low 4 bits of the 8 sub-block scales
  uint8_t qs[128];
};
static_assert(sizeof(BlockIQ4_XS) == 136, "BlockIQ4_XS must be 136 bytes, as in GGUF files");

// --- Ternary ----------------------------------------------------------------------------------

// TQ1_0: 256 values in {-1, 0, 1} times d. 1.6875 bpw.
// Each byte holds 5 (qs) or 4 (qh) base-3 digits as a fixed-point fraction: digit k of byte b is
// floor(3 * ((b * 3^k) mod 256) / 256). Value order: qs[0..31] digit 0, digit 1, ... digit 4
// (160 values), then qs[32..47] digits 0..4 (80 values), then qh[0..3] digits 0..3 (16 values).
struct BlockTQ1_0 {
  static constexpr int kValues = kSuperBlockValues;
  uint8_t qs[48];  // 5 trits per byte
  uint8_t qh[4];   // 4 trits per byte
  uint16_t d;      // scale, f16
};
static_assert(sizeof(BlockTQ1_0) == 54, "BlockTQ1_0 must be 54 bytes, as in GGUF files");

// TQ2_0: 256 values, x = d * (q - 1), q in 0..2 stored in 2 bits. 2.0625 bpw.
// 32-byte groups g = 0..1: bits 2k..2k+1 of qs[32g + m] are value 128g + 32k + m.
struct BlockTQ2_0 {
  static constexpr int kValues = kSuperBlockValues;
  uint8_t qs[64];
  uint16_t d;  // scale, f16
};
static_assert(sizeof(BlockTQ2_0) == 66, "BlockTQ2_0 must be 66 bytes, as in GGUF files");

// --- 4-bit floating point (E2M1) --------------------------------------------------------------

// The E2M1 values {0, 0.5, 1, 1.5, 2, 3, 4, 6} and their negatives, doubled so they are integers;
// the block scales are halved to compensate.
inline constexpr int8_t kFp4Levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// MXFP4 (OCP microscaling): 32 values, x = 2^(e - 127) * e2m1(q) = 2^(e - 128) * kFp4Levels[q].
// 4.25 bpw. Nibble order as Q4_0.
struct BlockMXFP4 {
  static constexpr int kValues = 32;
  uint8_t e;  // shared power-of-two exponent (E8M0, bias 127)
  uint8_t qs[16];
};
static_assert(sizeof(BlockMXFP4) == 17, "BlockMXFP4 must be 17 bytes, as in GGUF files");

// NVFP4: 64 values in 4 sub-blocks of 16, x = ue4m3(d[s]) * e2m1(q). 4.5 bpw.
// d[s] is an unsigned E4M3 float (bias 7; 0x00 and 0x7F decode to 0). Sub-block s uses
// qs[8s .. 8s+7]; byte j holds value 16s + j (low nibble) and 16s + 8 + j (high nibble).
struct BlockNVFP4 {
  static constexpr int kValues = 64;
  uint8_t d[4];  // per 16-value scales, UE4M3
  uint8_t qs[32];
};
static_assert(sizeof(BlockNVFP4) == 36, "BlockNVFP4 must be 36 bytes, as in GGUF files");

}  // namespace tensor
