// Dtype dispatch shared by the backends: each passes its own 16-bit storage
// types (the CPU's and the GPU's differ in their conversion code).
#pragma once
#include <cstdint>

#include "pyflame/dtype.h"

namespace pyflame {

// Calls f(T{}) with T the element type of `t`.
template <typename Half, typename BF16, typename F>
void dispatch_dtype(Dtype t, F&& f) {
  switch (t) {
    case Dtype::Bool: f(bool{}); break;
    case Dtype::Int32: f(int32_t{}); break;
    case Dtype::Int64: f(int64_t{}); break;
    case Dtype::Float16: f(Half{}); break;
    case Dtype::BFloat16: f(BF16{}); break;
    case Dtype::Float32: f(float{}); break;
    case Dtype::Float64: f(double{}); break;
    case Dtype::Int8: f(int8_t{}); break;
    case Dtype::Int16: f(int16_t{}); break;
    case Dtype::UInt8: f(uint8_t{}); break;
  }
}

// The floating types only (callers have checked the dtype is floating).
template <typename Half, typename BF16, typename F>
void dispatch_float_dtype(Dtype t, F&& f) {
  switch (t) {
    case Dtype::Float16: f(Half{}); break;
    case Dtype::BFloat16: f(BF16{}); break;
    case Dtype::Float64: f(double{}); break;
    default: f(float{}); break;
  }
}

}  // namespace pyflame
