// Shared pieces of the CPU kernels: dtype dispatch, strided iteration over
// N operands in runs along the last axis, and a parallel loop.
#pragma once
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/dispatch.h"
#include "backend/layout.h"
#include "core/half.h"
#include "pyflame/checked.h"
#include "pyflame/tensor.h"
#include "runtime/settings.h"
#include "runtime/allocator.h"

namespace pyflame::cpu {

using pyflame::Layout;
using pyflame::collapse;

template <typename T>
constexpr bool is_half_v = std::is_same_v<T, half_t> || std::is_same_v<T, bf16_t>;
// Arithmetic type for an element type: 16-bit floats compute in float.
template <typename T>
using acc_t = std::conditional_t<is_half_v<T>, float, T>;

// Arithmetic type of the float kernels: double for float64, float otherwise.
template <typename T>
using acc_float_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Calls f(T{}) with T the element type of `t` (16-bit floats as our storage types).
template <typename F>
void dispatch(Dtype t, F&& f) {
  dispatch_dtype<half_t, bf16_t>(t, std::forward<F>(f));
}

template <typename F>
void dispatch_float(Dtype t, F&& f) {
  dispatch_float_dtype<half_t, bf16_t>(t, std::forward<F>(f));
}

// The most threads a CPU kernel uses (settings.h, PYFLAME_NUM_THREADS): an
// explicit count, else every core, never OpenMP's default of the moment.
inline int max_threads() {
  static const int n = [] {
    const int set = settings::cpu_threads();
    return set > 0 ? set : std::max(1, omp_get_num_procs());
  }();
  return n;
}

// Splits [0, n) over up to max_threads() OpenMP threads when there is enough work.
template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  int nt = static_cast<int>(std::min<int64_t>(max_threads(), n / std::max<int64_t>(grain, 1)));
  if (nt <= 1) {
    f(int64_t{0}, n);
    return;
  }
  // An exception leaving an OpenMP region terminates the process: the first
  // one (an OutOfMemoryError from scratch space, say) is rethrown after it.
  std::exception_ptr error;
  std::once_flag first;
#pragma omp parallel num_threads(nt)
  {
    // Even chunks without computing n * t, which could overflow for huge n.
    const int t = omp_get_thread_num();
    const int64_t q = n / nt, r = n % nt;
    try {
      f(t * q + std::min<int64_t>(t, r), (t + 1) * q + std::min<int64_t>(t + 1, r));
    } catch (...) {
      std::call_once(first, [&] { error = std::current_exception(); });
    }
  }
  if (error) std::rethrow_exception(error);
}

// Host scratch of n elements from the tensor allocator. For sizes taken from
// an input that may be a broadcast view far larger than memory: one that
// cannot be satisfied is pf.OutOfMemoryError (operator new would abort
// under AddressSanitizer), and n * sizeof(T) is checked.
template <typename T>
class Scratch {
 public:
  explicit Scratch(int64_t n)
      : buf_(allocate(Device::cpu(), static_cast<size_t>(checked_mul(n, sizeof(T), "allocate", "scratch bytes")))) {}
  T* data() const { return static_cast<T*>(buf_->ptr); }
  T& operator[](int64_t i) const { return data()[i]; }

 private:
  std::shared_ptr<Buffer> buf_;
};

// Visits the linear range [begin, end) of the layout as runs along the last
// axis: fn(offsets, run_length, last_axis_strides), offsets in elements.
template <int N, typename F>
void for_each_run(const Layout<N>& L, int64_t begin, int64_t end, F&& fn) {
  using Arr = std::array<int64_t, N>;
  const int nd = static_cast<int>(L.shape.size());
  if (begin >= end) return;
  if (nd == 0) {
    fn(Arr{}, int64_t{1}, Arr{});
    return;
  }
  std::vector<int64_t> idx(nd);
  Arr off{}, ls{};
  int64_t rem = begin;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = rem % L.shape[d];
    rem /= L.shape[d];
    for (int k = 0; k < N; ++k) off[k] += idx[d] * L.strides[k][d];
  }
  for (int k = 0; k < N; ++k) ls[k] = L.strides[k][nd - 1];
  const int64_t last = L.shape[nd - 1];
  for (int64_t pos = begin; pos < end;) {
    int64_t n = std::min(last - idx[nd - 1], end - pos);
    fn(off, n, ls);
    pos += n;
    idx[nd - 1] += n;
    for (int k = 0; k < N; ++k) off[k] += n * ls[k];
    for (int d = nd - 1; d > 0 && idx[d] == L.shape[d]; --d) {
      for (int k = 0; k < N; ++k) off[k] += L.strides[k][d - 1] - idx[d] * L.strides[k][d];
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

// Elementwise driver: operand 0 is the row-major output, the others inputs
// already broadcast to its shape. fn(ptrs..., n, strides) per run.
constexpr int64_t kGrain = 1 << 15;

template <int N, typename F>
void elementwise_runs(const Tensor& out, const std::array<const Tensor*, N - 1>& ins, F&& fn) {
  std::array<const Strides*, N> st;
  st[0] = &out.strides();
  for (int k = 1; k < N; ++k) st[k] = &ins[k - 1]->strides();
  Layout<N> L = collapse<N>(out.shape(), st);
  parallel_for(out.size(), kGrain, [&](int64_t b, int64_t e) { for_each_run<N>(L, b, e, fn); });
}

}  // namespace pyflame::cpu
