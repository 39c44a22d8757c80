// Row gather from a matrix stored in any decodable type (embedding lookup): decodes only the rows
// asked for, so a quantized 262K-row token table never has to exist in f32.
#pragma once

#include <cstdint>
#include <span>

#include "tensor/dtype.h"
#include "util/result.h"

namespace tensor {

// matrix: [n_rows][row_length] values of `type`, rows stored back to back (row_bytes each), as a
// GGUF tensor with ne[0] = row_length. rows: the row ids to fetch. out: [rows.size()][row_length]
// floats. Errors, before writing anything: a type it cannot decode, a row length that is not whole
// blocks, a matrix whose size is not a whole number of rows, misaligned data, or a row id that is
// negative or past the last row (naming the id and its position).
util::Status gather_rows(DType type, std::span<const uint8_t> matrix, int64_t row_length,
                         std::span<const int32_t> rows, float* out);

}  // namespace tensor
