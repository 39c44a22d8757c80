// Reference quantizers: f32 rows to GGUF block formats, following the published algorithms of the
// GGUF ecosystem's reference row quantizers, so the files headroom writes load in other GGUF tools
// and keep the quality those tools would give.
//
// The algorithms (not the code) follow llama.cpp's quantizers: Q4_0..Q8_0 take the block's
// extreme value as the scale; the K-quants search scale (and min) per sub-block by weighted least
// squares over a sweep of candidate scales, then quantize the sub-block scales against one f16
// scale; IQ4 fits a scale to a non-linear codebook; the ternary and FP4 types round to their
// fixed levels. With an importance matrix the searches weigh each value by its column's
// importance. Float operations keep the reference order, so results match the reference's bytes
// (tests/tensor/quantize_test.cpp checks every type byte for byte against reference files).
#pragma once

#include <cstdint>

#include "tensor/blocks.h"
#include "tensor/dtype.h"
#include "util/result.h"

namespace tensor {

// In every function below, `n` counts values (a multiple of the block size) and src must hold
// finite values (the dispatcher checks both). `importance`, where taken, is null or one
// non-negative weight per value (an importance matrix's column, llama.cpp's imatrix): with it the
// quantizer minimises the importance-weighted error instead of its plain heuristics. Importance
// is per row: the 32-value types weigh values against the whole row's mean square, so pass whole
// rows.
void quantize_row_f16(const float* src, uint16_t* dst, int64_t n);
void quantize_row_bf16(const float* src, uint16_t* dst, int64_t n);
void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n,
                       const float* importance = nullptr);
void quantize_row_q4_1(const float* src, BlockQ4_1* dst, int64_t n,
                       const float* importance = nullptr);
void quantize_row_q5_0(const float* src, BlockQ5_0* dst, int64_t n,
                       const float* importance = nullptr);
void quantize_row_q5_1(const float* src, BlockQ5_1* dst, int64_t n,
                       const float* importance = nullptr);
void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n);
void quantize_row_q2_k(const float* src, BlockQ2_K* dst, int64_t n,
                       const float* importance = nullptr);
void quantize_row_q3_k(const float* src, BlockQ3_K* dst, int64_t n,
                       const float* importance = nullptr);
void quantize_row_q4_k(const float* src, BlockQ4_K* dst, int64_t n,
                       const float* importance = nullptr);
void quantize_row_q5_k(const float* src, BlockQ5_K* dst, int64_t n,
                       const float* importance = nullptr);
void quantize_row_q6_k(const float* src, BlockQ6_K* dst, int64_t n,
                       const float* importance = nullptr);
void quantize_row_iq4_nl(const float* src, BlockIQ4_NL* dst, int64_t n,
                         const float* importance = nullptr);
void quantize_row_iq4_xs(const float* src, BlockIQ4_XS* dst, int64_t n,
                         const float* importance = nullptr);
void quantize_row_tq1_0(const float* src, BlockTQ1_0* dst, int64_t n);
void quantize_row_tq2_0(const float* src, BlockTQ2_0* dst, int64_t n);
void quantize_row_mxfp4(const float* src, BlockMXFP4* dst, int64_t n);
void quantize_row_nvfp4(const float* src, BlockNVFP4* dst, int64_t n);
// Activations for K-quant dot products: x = d * q with q in -127..127 and f32 d, plus the sums of
// each 16 quants.
void quantize_row_q8_k(const float* src, BlockQ8_K* dst, int64_t n);

// Whether the quantizer of `type` uses importance (the others ignore it, as the reference does).
bool uses_importance(DType type);

// Encodes n values from src into row_bytes(type, n) bytes at dst, weighted by `importance` (null,
// or n weights for the whole row) where the type uses it. Errors, leaving dst untouched: a type
// it cannot write (named), n not a whole number of blocks, dst misaligned for the block struct,
// or a non-finite source value for a block type (named with its index; F16/BF16 keep inf and nan
// as they are).
util::Status quantize_row(DType type, const float* src, void* dst, int64_t n,
                          const float* importance = nullptr);

}  // namespace tensor
