// GPU kernels of the scatter family: put (a strided copy of x unless its
// buffer was donated, then one thread per index; repeated indices keep one
// of the writes), range checked like gather through a device flag.
#include "backend/rocm/kernels/common.h"

namespace pyflame::backend::rocm {

namespace {

template <typename T, typename I>
__global__ void put_kernel(T* out, const T* src, const I* idx, int64_t k, int64_t n,
                           long long* flag) {
  PF_GRID_STRIDE(i, k) {
    int64_t j = static_cast<int64_t>(idx[i]);
    if (j < 0) j += n;
    if (j < 0 || j >= n) {
      flag[1] = static_cast<long long>(idx[i]);
      flag[0] = 1;
      continue;
    }
    out[j] = src[i];
  }
}

}  // namespace
}  // namespace pyflame::backend::rocm

namespace pyflame {

using namespace backend::rocm;

void Put::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const Tensor &x = in[0], &index = in[1], &src = in[2];
  const int64_t n = out.size(), k = index.size();
  if (out.buffer() != x.buffer() && n > 0) {
    copy_strided(x.dtype(), x.raw_data(), x.shape(), x.strides(), out.raw_data(), ctx);
  }
  if (k == 0) return;
  // Checked at the end of the evaluation, when this primitive may be gone:
  // the lambda holds copies of what the message needs.
  auto* flag = reinterpret_cast<long long*>(
      deferred_check(ctx, 2, [f = fn, ax = axis, ax_size = axis_size, n](const int64_t* w) {
        throw IndexError(put_range_error(f, ax, ax_size, w[1], n));
      }));
  dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto run = [&](auto itag) {
      using I = decltype(itag);
      put_kernel<T, I><<<grid_for(ctx, k, kThreads), kThreads, 0, ctx.stream>>>(
          out.data<T>(), src.data<T>(), index.data<I>(), k, n, flag);
      PF_HIP_CHECK_LAUNCH();
    };
    if (index.dtype() == Dtype::Int32)
      run(int32_t{});
    else
      run(int64_t{});
  });
}

}  // namespace pyflame
