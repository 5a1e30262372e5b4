// CPU kernels of the scatter family: put (a copy of x unless its buffer was
// donated, then one write per index, in index order so the last write wins).
#include <cstring>

#include "backend/cpu/copy.h"
#include "backend/cpu/kernel_utils.h"
#include "ir/primitives.h"

namespace pyflame {

void Put::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const Tensor &x = in[0], &index = in[1], &src = in[2];
  if (out.buffer() != x.buffer() && out.size() > 0) {
    cpu::copy_strided_to_contiguous(x, out.raw_data());
  }
  const int64_t n = out.size(), k = index.size();
  if (k == 0) return;
  cpu::dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* po = out.data<T>();
    const T* ps = src.data<T>();
    auto run = [&](auto itag) {
      using I = decltype(itag);
      const I* pi = index.data<I>();
      for (int64_t i = 0; i < k; ++i) {
        int64_t j = static_cast<int64_t>(pi[i]);
        if (j < 0) j += n;
        if (j < 0 || j >= n) throw IndexError(range_error(static_cast<int64_t>(pi[i]), n));
        po[j] = ps[i];
      }
    };
    if (index.dtype() == Dtype::Int32)
      run(int32_t{});
    else
      run(int64_t{});
  });
}

}  // namespace pyflame
