// Placeholder translation unit until the block formats land.
#include "tensor/dtype.h"
