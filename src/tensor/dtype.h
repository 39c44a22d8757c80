// Tensor element types: the GGUF tensor types, as the rest of headroom names them.
#pragma once

#include "gguf/types.h"

namespace tensor {

using DType = gguf::TensorType;

}  // namespace tensor
