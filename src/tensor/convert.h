// Row conversions between stored tensor types and f32: the dispatchers of tensor/dequantize.h
// (dequantize_row) and tensor/quantize.h (quantize_row), for callers that want both.
#pragma once

#include "tensor/dequantize.h"
#include "tensor/quantize.h"
