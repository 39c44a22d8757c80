// Row gather (embedding lookup) over quantized matrices.
#include "tensor/gather.h"

#include "tensor/dequantize.h"

namespace tensor {

util::Status gather_rows(DType type, std::span<const uint8_t> matrix, int64_t row_length,
                         std::span<const int32_t> rows, float* out) {
  const DequantizeRowFn decode = find_dequantizer(type);
  if (decode == nullptr) {
    return util::errorf(
        "tensor: cannot gather rows of a {} matrix (no decoder for this type) — requantize the "
        "model to a supported type such as Q4_K, Q8_0 or F16",
        dtype_name(type));
  }
  HR_TRY(check_row_length(type, row_length));
  if (row_length == 0) {
    return util::errorf("tensor: cannot gather rows of length 0 from a {} matrix",
                        dtype_name(type));
  }
  const auto stride = static_cast<size_t>(row_bytes(type, row_length));
  if (matrix.size() % stride != 0) {
    return util::errorf(
        "tensor: a {} matrix of {} bytes is not a whole number of {}-value rows ({} bytes each) "
        "— the row length does not match the tensor",
        dtype_name(type), matrix.size(), row_length, stride);
  }
  // Rows start at multiples of the row size, and every block size is a multiple of its
  // alignment, so an aligned matrix has aligned rows.
  HR_TRY(check_block_alignment(type, matrix.data()));
  const auto n_rows = static_cast<int64_t>(matrix.size() / stride);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= n_rows) {
      return util::errorf(
          "tensor: row id {} at position {} is out of range for a matrix of {} rows — check the "
          "ids (token ids against the vocabulary size)",
          rows[i], i, n_rows);
    }
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    decode(matrix.data() + static_cast<size_t>(rows[i]) * stride, out + i * row_length, row_length);
  }
  return {};
}

}  // namespace tensor
