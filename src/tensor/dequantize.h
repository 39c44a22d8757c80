// Scalar reference dequantizers: rows of GGUF tensor data back to f32, bit-exact with the GGUF
// ecosystem's own decoders (checked against ../shared/testdata/quant/ in tests/tensor/).
//
// These are the truth that faster kernels are compared with, so they are written for clarity:
// one loop per layout, each rebuilding values exactly as tensor/blocks.h describes, in the same
// float operation order as the reference decoders (a different order changes the last bit).
#pragma once

#include <cstdint>

#include "tensor/blocks.h"
#include "tensor/dtype.h"
#include "util/result.h"

namespace tensor {

// In every function below, `n` counts values: src holds n / Block::kValues blocks and dst
// receives n floats. n must be a multiple of the block size (the dispatcher checks it).
void dequantize_row_f32(const float* src, float* dst, int64_t n);
void dequantize_row_f16(const uint16_t* src, float* dst, int64_t n);
void dequantize_row_bf16(const uint16_t* src, float* dst, int64_t n);
void dequantize_row_q4_0(const BlockQ4_0* src, float* dst, int64_t n);
void dequantize_row_q4_1(const BlockQ4_1* src, float* dst, int64_t n);
void dequantize_row_q5_0(const BlockQ5_0* src, float* dst, int64_t n);
void dequantize_row_q5_1(const BlockQ5_1* src, float* dst, int64_t n);
void dequantize_row_q8_0(const BlockQ8_0* src, float* dst, int64_t n);
void dequantize_row_q2_k(const BlockQ2_K* src, float* dst, int64_t n);
void dequantize_row_q3_k(const BlockQ3_K* src, float* dst, int64_t n);
void dequantize_row_q4_k(const BlockQ4_K* src, float* dst, int64_t n);
void dequantize_row_q5_k(const BlockQ5_K* src, float* dst, int64_t n);
void dequantize_row_q6_k(const BlockQ6_K* src, float* dst, int64_t n);
void dequantize_row_q8_k(const BlockQ8_K* src, float* dst, int64_t n);
void dequantize_row_iq4_nl(const BlockIQ4_NL* src, float* dst, int64_t n);
void dequantize_row_iq4_xs(const BlockIQ4_XS* src, float* dst, int64_t n);
void dequantize_row_tq1_0(const BlockTQ1_0* src, float* dst, int64_t n);
void dequantize_row_tq2_0(const BlockTQ2_0* src, float* dst, int64_t n);
void dequantize_row_mxfp4(const BlockMXFP4* src, float* dst, int64_t n);
void dequantize_row_nvfp4(const BlockNVFP4* src, float* dst, int64_t n);

// The decoder of a type behind one signature, or nullptr for a type it cannot decode. For callers
// that decode many rows of one type (no per-row checks); they must check lengths and alignment.
using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n);
DequantizeRowFn find_dequantizer(DType type);

// Decodes n values of `type` from src (row_bytes(type, n) bytes) into dst. Errors, without
// touching dst: a type it does not decode (named), n not a whole number of blocks, or src not
// aligned for the type's block struct (GGUF tensor data always is).
util::Status dequantize_row(DType type, const void* src, float* dst, int64_t n);

}  // namespace tensor
