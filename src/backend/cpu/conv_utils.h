// Shared pieces of the CPU convolution, pooling and batch-norm kernels:
// 3-d spatial geometry (1-d and 2-d problems get leading axes of size 1)
// and float32 views of row-major tensors of any float dtype.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/cpu/copy.h"
#include "backend/cpu/kernel_utils.h"

namespace pyflame::cpu {

struct Geom3 {
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, p[3] = {0, 0, 0}, d[3] = {1, 1, 1};
  int64_t ivol() const { return in[0] * in[1] * in[2]; }
  int64_t ovol() const { return out[0] * out[1] * out[2]; }
  int64_t kvol() const { return k[0] * k[1] * k[2]; }
};

// Spatial sizes of a (N, C, *spatial) shape as 3 axes.
inline void spatial3(const Shape& shape, int64_t (&out)[3]) {
  const int nsp = static_cast<int>(shape.size()) - 2;
  out[0] = out[1] = out[2] = 1;
  for (int d = 0; d < nsp; ++d) out[3 - nsp + d] = shape[2 + d];
}

// A tensor's values as row-major float32: a row-major float32 tensor's own
// memory, else a converted copy (a convolution's data input may be
// channels-last, see ir/primitives_conv.h).
class FloatView {
 public:
  explicit FloatView(const Tensor& t) {
    const void* src = t.raw_data();
    std::vector<char> dense;
    if (!t.is_row_contiguous()) {
      dense.resize(t.nbytes());
      copy_strided_to_contiguous(t, dense.data());
      src = dense.data();
    }
    if (t.dtype() == Dtype::Float32 && dense.empty()) {
      ptr_ = static_cast<const float*>(src);
      return;
    }
    buf_.resize(t.size());
    dispatch_float(t.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* p = static_cast<const T*>(src);
      parallel_for(t.size(), kGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) buf_[i] = static_cast<float>(p[i]);
      });
    });
    ptr_ = buf_.data();
  }
  const float* data() const { return ptr_; }

 private:
  const float* ptr_ = nullptr;
  std::vector<float> buf_;
};

// A float32 destination for a row-major output; commit() converts into a
// 16-bit output.
class FloatOut {
 public:
  explicit FloatOut(Tensor& t) : t_(t) {
    if (t.dtype() == Dtype::Float32) {
      ptr_ = t.data<float>();
    } else {
      buf_.resize(t.size());
      ptr_ = buf_.data();
    }
  }
  float* data() { return ptr_; }
  void commit() {
    if (t_.dtype() == Dtype::Float32) return;
    dispatch_float(t_.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* o = t_.data<T>();
      parallel_for(t_.size(), kGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) o[i] = T(buf_[i]);
      });
    });
  }

 private:
  Tensor& t_;
  float* ptr_ = nullptr;
  std::vector<float> buf_;
};

}  // namespace pyflame::cpu
