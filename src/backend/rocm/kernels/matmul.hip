// Matmul: float types through BLAS (strided-batched GEMM over the collapsed
// batch axes), integers through a plain kernel. Row-major C = A B is issued
// as column-major C^T = B^T A^T, so no operand is transposed in memory.
#include <algorithm>

#include "backend/rocm/blas.h"
#include "backend/rocm/kernels/common.h"
#include "ir/passes/fuse.h"

namespace pyflame::backend::rocm {

namespace {

template <typename T>
__global__ void matmul_int(const T* a, const T* b, T* c, int64_t M, int64_t N, int64_t K, int64_t total) {
  PF_GRID_STRIDE(i, total) {
    const int64_t n = i % N, m = (i / N) % M, bt = i / (M * N);
    const T* pa = a + (bt * M + m) * K;
    const T* pb = b + bt * K * N + n;
    int64_t acc = 0;
    for (int64_t k = 0; k < K; ++k) acc += int64_t(pa[k]) * int64_t(pb[k * N]);
    c[i] = static_cast<T>(acc);
  }
}

// An operand as BLAS sees it: data, strides, per-matrix layout. Operands no
// BLAS layout fits are first copied row-major into `hold`.
struct Operand {
  const char* data = nullptr;
  Strides strides;
  bool trans = false;
  int64_t ld = 0;
  std::shared_ptr<Buffer> hold;
};

Operand prepare(const Tensor& t, DeviceContext& ctx) {
  Operand o;
  o.data = static_cast<const char*>(t.raw_data());
  o.strides = t.strides();
  const int nd = t.ndim();
  const int64_t rows = t.shape()[nd - 2], cols = t.shape()[nd - 1];
  if (!matrix_layout(rows, cols, o.strides[nd - 2], o.strides[nd - 1], o.trans, o.ld)) {
    o.hold = temp_buffer(ctx, t.nbytes());
    copy_strided(t.dtype(), t.raw_data(), t.shape(), t.strides(), o.hold->ptr, ctx);
    o.data = static_cast<const char*>(o.hold->ptr);
    o.strides = row_major_strides(t.shape());
    matrix_layout(rows, cols, o.strides[nd - 2], o.strides[nd - 1], o.trans, o.ld);
  }
  return o;
}

void check_int_range(int64_t v, const char* what) {
  if (v > INT32_MAX) {
    throw ValueError(errmsg("matmul", std::string(what) + " exceeds the BLAS 32-bit index range"));
  }
}

}  // namespace
}  // namespace pyflame::backend::rocm

namespace pyflame {

using namespace backend::rocm;

namespace backend::rocm {
bool try_gemv(const std::vector<Tensor>& in, Tensor& out);  // gemv.hip
}

void Matmul::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  if (try_gemv(in, out)) return;  // batch-1 products: memory-bound GEMV kernel (gemv.hip)
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const int nd = out.ndim();
  const int64_t M = out.shape()[nd - 2], N = out.shape()[nd - 1], K = in[0].shape()[nd - 1];
  if (K == 0) {
    PF_HIP_CHECK(hipMemsetAsync(out.raw_data(), 0, out.nbytes(), ctx.stream));
    return;
  }
  if (is_integral(out.dtype())) {
    Tensor a = in[0], b = in[1];
    std::shared_ptr<Buffer> ha, hb;
    auto dense = [&](const Tensor& t, std::shared_ptr<Buffer>& h) -> const void* {
      if (t.is_row_contiguous()) return t.raw_data();
      h = temp_buffer(ctx, t.nbytes());
      copy_strided(t.dtype(), t.raw_data(), t.shape(), t.strides(), h->ptr, ctx);
      return h->ptr;
    };
    const void* pa = dense(a, ha);
    const void* pb = dense(b, hb);
    dispatch(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        matmul_int<T><<<grid_for(ctx, out.size(), kThreads), kThreads, 0, ctx.stream>>>(
            static_cast<const T*>(pa), static_cast<const T*>(pb), out.data<T>(), M, N, K, out.size());
        PF_HIP_CHECK_LAUNCH();
      }
    });
    return;
  }
  check_int_range(M, "M");
  check_int_range(N, "N");
  check_int_range(K, "K");
  Operand A = prepare(in[0], ctx), B = prepare(in[1], ctx);
  // Batch axes of A, B and the row-major C, collapsed together.
  Shape batch(out.shape().begin(), out.shape().end() - 2);
  Strides sa(A.strides.begin(), A.strides.end() - 2), sb(B.strides.begin(), B.strides.end() - 2);
  Strides sc = row_major_strides(out.shape());
  sc.resize(batch.size());
  Layout<3> L = collapse<3>(batch, {&sa, &sb, &sc});
  const int nb = static_cast<int>(L.shape.size());
  const int64_t inner = nb ? L.shape[nb - 1] : 1;
  const int64_t esz = static_cast<int64_t>(out.itemsize());
  auto st = [&](int k) { return nb ? L.strides[k][nb - 1] : 0; };
  ROCmBLAS& blas = get_blas(ctx.device);
  char* c = static_cast<char*>(out.raw_data());
  // Outer batch axes (rare: non-uniform batch strides) loop on the host.
  const int64_t outer = shape_size(batch) / std::max<int64_t>(inner, 1);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t oa = 0, ob = 0, oc = 0, rem = o;
    for (int d = nb - 2; d >= 0; --d) {
      int64_t idx = rem % L.shape[d];
      rem /= L.shape[d];
      oa += idx * L.strides[0][d];
      ob += idx * L.strides[1][d];
      oc += idx * L.strides[2][d];
    }
    blas.gemm_ex(out.dtype(), B.trans ? Trans::T : Trans::N, A.trans ? Trans::T : Trans::N, int(N), int(M),
                 int(K), 1.0f, B.data + ob * esz, int(B.ld), st(1), A.data + oa * esz, int(A.ld), st(0), 0.0f,
                 c + oc * esz, int(N), st(2) ? st(2) : M * N, int(inner));
  }
}

// The product with its bias and relu in the library's epilogue: one GEMM
// when the library takes it with the plain product's algorithm (same bits as
// the unfused ops, blas_lt.cc), else the unfused steps. hipBLASLt's relu is
// max(x, 0), which makes NaN 0 where relu keeps it, so on AMD only the bias
// goes into the epilogue and relu runs as its own kernel.
void FusedGemm::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
#if defined(__HIP_PLATFORM_AMD__)
  constexpr bool kLibraryRelu = false;
#else
  constexpr bool kLibraryRelu = true;
#endif
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const int64_t M = out.shape()[0], N = out.shape()[1], K = in[0].shape()[1];
  GemmEpilogue e;
  e.bias = bias && in[2].strides()[0] == 1 ? in[2].raw_data() : nullptr;
  e.relu = relu && kLibraryRelu;
  const bool rest_ok = !bias || e.bias;  // a strided bias: unfused
  if (e.any() && rest_ok && M <= INT32_MAX && N <= INT32_MAX && K <= INT32_MAX && K > 0) {
    Operand A = prepare(in[0], ctx), B = prepare(in[1], ctx);
    if (get_blas(ctx.device).gemm_epilogue(out.dtype(), B.trans ? Trans::T : Trans::N, A.trans ? Trans::T : Trans::N,
                                           int(N), int(M), int(K), B.data, int(B.ld), 0, A.data, int(A.ld), 0,
                                           out.raw_data(), int(N), M * N, 1, e)) {
      fuse::counters().gemm_epilogues++;
      if (relu && !e.relu) {
        Unary r(UnaryOp::Relu);
        r.eval_gpu({out}, out);
      }
      return;
    }
    fuse::counters().fallbacks++;  // the library has no such epilogue for this problem
  }
  eval_unfused(in, out);
}

}  // namespace pyflame
