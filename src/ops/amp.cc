#include "pyflame/amp.h"

#include "pyflame/errors.h"
#include "pyflame/ops.h"

namespace pyflame {

namespace {
thread_local std::optional<Dtype> g_autocast;
}  // namespace

std::optional<Dtype> autocast_dtype() { return g_autocast; }

void set_autocast_dtype(std::optional<Dtype> dtype) {
  if (dtype && *dtype != Dtype::Float16 && *dtype != Dtype::BFloat16) {
    throw ValueError(errmsg("autocast", std::string("the autocast dtype must be float16 or "
                                                    "bfloat16, got ") + dtype_name(*dtype)));
  }
  g_autocast = dtype;
}

Tensor autocast_cast(const Tensor& x, Dtype dtype) {
  // float64 is left alone, as PyTorch's autocast leaves double tensors.
  if (!x.defined() || !is_floating(x.dtype()) || x.dtype() == Dtype::Float64 || x.dtype() == dtype) return x;
  return astype(x, dtype);
}

std::optional<Tensor> autocast_cast(const std::optional<Tensor>& x, Dtype dtype) {
  if (!x) return x;
  return autocast_cast(*x, dtype);
}

}  // namespace pyflame
