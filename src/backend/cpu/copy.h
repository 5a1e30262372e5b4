#pragma once
#include "pyflame/tensor.h"

namespace pyflame::cpu {

// Copies an evaluated host tensor of any layout into row-major `dst`.
void copy_strided_to_contiguous(const Tensor& src, void* dst);

}  // namespace pyflame::cpu
