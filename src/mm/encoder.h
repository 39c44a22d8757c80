// What the two encoders share: a trace of named stages for tests, and the staged arrays they
// fill on the host for the ops.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

namespace mm {

// Called after each stage with its values on the host ([rows][values.size() / rows]), under the
// reference's names (patch_embd, blk.N.out, pooled, projected; subsampled, encoded). Null: none.
using Trace =
    std::function<void(std::string_view name, std::span<const float> values, int64_t rows)>;

}  // namespace mm
