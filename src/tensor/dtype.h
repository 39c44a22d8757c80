// Tensor element types (the GGUF tensor types) and what headroom can do with each: sizes of rows,
// which types it decodes and which it can write.
#pragma once

#include <cstdint>
#include <string_view>

#include "gguf/types.h"
#include "util/result.h"

namespace tensor {

using DType = gguf::TensorType;

std::string_view dtype_name(DType type);  // "Q4_K", as GGUF tools print it

// Values per block: 1 for plain float/int types, 32 for Q4_0, 256 for the K-quants …
int64_t block_values(DType type);

// Bytes that a row of n values occupies. n must be a whole number of blocks: check that first
// with check_row_length when n comes from input.
int64_t row_bytes(DType type, int64_t n);

// OK when n values of `type` form whole blocks (n >= 0); otherwise a one-line error naming the
// type, its block size and n.
util::Status check_row_length(DType type, int64_t n);

// Alignment the type's block struct needs (tensor/blocks.h): 4 for F32 and Q8_K, 2 for types
// with f16 scales, 1 for byte-only blocks. GGUF tensor data is at least 32-byte aligned.
int64_t block_alignment(DType type);
// OK when `data` is aligned for the block struct of `type`; otherwise a one-line error.
util::Status check_block_alignment(DType type, const void* data);

// Whether dequantize_row (tensor/dequantize.h) and gather_rows decode this type.
bool can_dequantize(DType type);
// Whether quantize_row (tensor/quantize.h) writes this type.
bool can_quantize(DType type);

}  // namespace tensor
