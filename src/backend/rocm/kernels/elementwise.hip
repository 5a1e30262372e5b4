// Elementwise kernels: unary, binary, where, astype (and strided copies).
// Inputs arrive broadcast to the output shape; contiguous and scalar inputs
// take a vectorized path, any other layout an indexed one.
#include "backend/elementwise_math.h"
#include "backend/rocm/blas.h"
#include "backend/rocm/kernels/common.h"
#include "pyflame/backend/rocm.h"

namespace pyflame::backend::rocm {

namespace {

template <int N, typename T>
struct Inputs {
  const T* p[N];
  Access a[N];
};

template <UnaryOp Op>
struct UnaryF {
  template <typename A>
  __device__ A operator()(A x) const { return unary_apply<Op>(x); }
};

// Comparisons give bool. (Keyed on the op's integral_constant: GCC 12 fails
// on the equivalent conditional_t written inside the dispatch lambdas.)
template <typename OpC, typename T>
using binary_out_t = std::conditional_t<is_comparison(OpC::value), bool, T>;

template <BinaryOp Op>
struct BinaryF {
  template <typename A>
  __device__ auto operator()(A x, A y) const { return binary_apply<Op>(x, y); }
};

// A binary op with one operand a kernel argument: s op x (first), or x op s.
// The side is a run-time argument (uniform across the grid): one kernel per
// op and dtype, not two.
template <BinaryOp Op, typename A>
struct ScalarBinaryF {
  A s;
  bool first;
  __device__ auto operator()(A x) const { return first ? binary_apply<Op>(s, x) : binary_apply<Op>(x, s); }
};

template <typename To>
struct ConvertF {
  template <typename A>
  __device__ To operator()(A x) const { return convert<To>(x); }
};

struct IdentityF {
  template <typename A>
  __device__ A operator()(A x) const { return x; }
};

template <int N, typename F, typename A>
__device__ inline auto call(const F& f, const A (&v)[N]) {
  if constexpr (N == 1) return f(v[0]);
  else return f(v[0], v[1]);
}

template <int N, typename T, typename R, typename F>
__global__ void map_kernel(R* out, Inputs<N, T> in, Indexer<N> ix, int64_t n, F f) {
  bool strided = false;
#pragma unroll
  for (int k = 0; k < N; ++k) strided |= in.a[k] == Access::Strided;
  PF_GRID_STRIDE(i, n) {
    int64_t o[N];
    if (strided) ix.offsets(i, o);
    acc_t<T> v[N];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      int64_t off = in.a[k] == Access::Contig ? i : in.a[k] == Access::Scalar ? 0 : o[k];
      v[k] = static_cast<acc_t<T>>(in.p[k][off]);
    }
    out[i] = R(call<N>(f, v));
  }
}

// Shape of the vectorized map: `threads` per block; each thread moves `vectors` 16-byte vectors
// of every operand per tile, all loaded before any is stored, so that many loads are in flight;
// one block per tile (the device's scheduler balances the load). Block sizes are multiples of
// 64 (a wave on AMD's gfx9). On an H100 at 64M floats, {128, 2} runs silu and exp at 99.5% of a
// device-to-device copy's rate (the previous grid-stride kernel: 94%); 128 or 256 threads with
// 1-4 vectors are within 0.5% of it, a grid of only the resident blocks was 7% slower, and
// streaming or read-only cache hints changed nothing.
struct MapShape {
  int threads;
  int vectors;
};
constexpr MapShape kMap{128, 2};

// Contiguous and scalar inputs, V elements per vector. Tile t covers vectors
// [t * tile, (t + 1) * tile), tile = threads * kMap.vectors; thread i takes vectors i,
// i + threads, ... of it (each load instruction coalesced across the block). Elements past
// the last whole vector go to the last block.
template <int N, int V, typename T, typename R, typename F>
__global__ void __launch_bounds__(kMap.threads) map_tile_kernel(R* out, Inputs<N, T> in, int64_t n, F f) {
  constexpr int kThreadsT = kMap.threads, U = kMap.vectors;
  constexpr int64_t kTile = int64_t(kThreadsT) * U;
  using P = Pack<T, V>;
  const int64_t nv = n / V, tiles = (nv + kTile - 1) / kTile;
  T s[N];  // broadcast inputs
#pragma unroll
  for (int k = 0; k < N; ++k) s[k] = in.a[k] == Access::Scalar ? in.p[k][0] : T();
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t first = t * kTile + threadIdx.x;
    const bool full = (t + 1) * kTile <= nv;
    P a[U][N];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t j = first + int64_t(u) * kThreadsT;
#pragma unroll
      for (int k = 0; k < N; ++k) {
        if (in.a[k] != Access::Contig) {
#pragma unroll
          for (int e = 0; e < V; ++e) a[u][k].v[e] = s[k];
        } else if (full || j < nv) {
          a[u][k] = reinterpret_cast<const P*>(in.p[k])[j];
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t j = first + int64_t(u) * kThreadsT;
      if (!full && j >= nv) continue;
      Pack<R, V> r;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        acc_t<T> v[N];
#pragma unroll
        for (int k = 0; k < N; ++k) v[k] = static_cast<acc_t<T>>(a[u][k].v[e]);
        r.v[e] = R(call<N>(f, v));
      }
      reinterpret_cast<Pack<R, V>*>(out)[j] = r;
    }
  }
  if (blockIdx.x == gridDim.x - 1) {
    for (int64_t i = nv * V + threadIdx.x; i < n; i += kThreadsT) {
      acc_t<T> v[N];
#pragma unroll
      for (int k = 0; k < N; ++k) v[k] = static_cast<acc_t<T>>(in.p[k][in.a[k] == Access::Contig ? i : 0]);
      out[i] = R(call<N>(f, v));
    }
  }
}

// Grid of map_tile_kernel: one block per tile (gridDim.x * blockDim.x must fit 32 bits on AMD).
inline unsigned map_tile_grid(int64_t n, int V) {
  const int64_t tile = int64_t(kMap.threads) * kMap.vectors;
  const int64_t tiles = std::max<int64_t>(1, (n / V + tile - 1) / tile);
  return static_cast<unsigned>(std::min(tiles, int64_t(INT32_MAX) / kMap.threads));
}

// out (row-major, `shape`) = f(inputs...), inputs with their own strides.
template <int N, typename T, typename R, typename F>
void launch_map(R* out, std::array<const T*, N> ptrs, const Shape& shape,
                std::array<const Strides*, N> st, F f, DeviceContext& ctx, const char* fn) {
  const int64_t n = shape_size(shape);
  if (n == 0) return;
  constexpr int kBytes = sizeof(T) > sizeof(R) ? sizeof(T) : sizeof(R);
  constexpr int V = 16 / kBytes > 8 ? 8 : 16 / kBytes;
  Inputs<N, T> in;
  bool vec = V > 1 && (reinterpret_cast<uintptr_t>(out) % (sizeof(R) * V)) == 0;
  bool strided = false;
  for (int k = 0; k < N; ++k) {
    in.p[k] = ptrs[k];
    in.a[k] = access_of(shape, *st[k]);
    strided |= in.a[k] == Access::Strided;
    vec &= in.a[k] == Access::Scalar ||
           (in.a[k] == Access::Contig && reinterpret_cast<uintptr_t>(ptrs[k]) % (sizeof(T) * V) == 0);
  }
  if (vec) {
    map_tile_kernel<N, V, T, R, F><<<map_tile_grid(n, V), kMap.threads, 0, ctx.stream>>>(
        out, in, n, f);
  } else {
    Indexer<N> ix = strided ? make_indexer<N>(shape, st, fn) : Indexer<N>{};
    map_kernel<N, T, R, F><<<grid_for(ctx, n, kThreads), kThreads, 0, ctx.stream>>>(out, in, ix, n, f);
  }
  PF_HIP_CHECK_LAUNCH();
}

template <typename T>
__global__ void where_kernel(T* out, const bool* c, const T* a, const T* b, Indexer<3> ix, int64_t n) {
  PF_GRID_STRIDE(i, n) {
    int64_t o[3];
    ix.offsets(i, o);
    out[i] = c[o[0]] ? a[o[1]] : b[o[2]];
  }
}

}  // namespace

void copy_strided(Dtype dtype, const void* src, const Shape& shape, const Strides& strides, void* dst,
                  DeviceContext& ctx) {
  // Copies move bits: dispatch on the element size only.
  auto run = [&](auto tag) {
    using T = decltype(tag);
    launch_map<1, T, T>(static_cast<T*>(dst), {static_cast<const T*>(src)}, shape, {&strides},
                        IdentityF{}, ctx, "copy");
  };
  switch (itemsize(dtype)) {
    case 1: run(uint8_t{}); break;
    case 2: run(uint16_t{}); break;
    case 4: run(uint32_t{}); break;
    default: run(uint64_t{}); break;
  }
}

std::shared_ptr<Buffer> temp_buffer(DeviceContext& ctx, size_t bytes) { return allocate_on(ctx, bytes); }

// Materializes a transposed float32 matrix (a .T view) with BLAS geam, the
// library's tuned out-of-place transpose. False for any other layout.
bool transpose_with_geam(const Tensor& x, Tensor& out, DeviceContext& ctx) {
  if (x.dtype() != Dtype::Float32 || x.ndim() != 2) return false;
  const int64_t rows = x.shape()[0], cols = x.shape()[1];
  if (rows < 2 || cols < 2 || x.strides()[0] != 1 || x.strides()[1] != rows) return false;
  if (rows > INT32_MAX || cols > INT32_MAX) return false;
  // Row-major out (rows x cols) is column-major (cols x rows); the input's
  // memory is column-major (cols x rows) transposed, i.e. column-major rows x cols.
  // B = C with beta 0 is the libraries' documented in-place form: B is not read.
  float* c = out.data<float>();
  get_blas(ctx.device).geam(Trans::T, Trans::N, int(cols), int(rows), 1.0f, x.data<float>(), int(rows), 0.0f, c,
                            int(cols), c, int(cols));
  return true;
}

}  // namespace pyflame::backend::rocm

namespace pyflame {

using namespace backend::rocm;

void Unary::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  visit_unary(op, [&](auto opc) {
    constexpr UnaryOp O = decltype(opc)::value;
    dispatch(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool> || (std::is_integral_v<T> && !unary_takes_ints<O>)) {
        throw ValueError(errmsg(name(), std::string("not supported for ") + dtype_name(out.dtype())));
      } else {
        launch_map<1, T, T>(out.data<T>(), {in[0].data<T>()}, out.shape(), {&in[0].strides()},
                            UnaryF<O>{}, ctx, name());
      }
    });
  });
}

namespace {
// Sets *bad when an exponent (strided, broadcast) is negative.
template <typename T>
__global__ void negative_exponent_kernel(const T* e, Indexer<1> ix, int64_t n, int* bad) {
  PF_GRID_STRIDE(i, n) {
    int64_t o[1];
    ix.offsets(i, o);
    if (e[o[0]] < 0) *bad = 1;
  }
}

// Integer pow raises on a negative exponent, as on the CPU: a check kernel
// whose flag is read at the end of the evaluation (integer pow is rare;
// float pow skips this).
void check_int_exponents(const Tensor& e, const Shape& shape, DeviceContext& ctx) {
  const int64_t n = shape_size(shape);
  int* flag = reinterpret_cast<int*>(deferred_check(ctx, 1, [](const int64_t*) {
    throw ValueError(errmsg("pow", "integers to negative integer powers are not allowed"));
  }));
  Indexer<1> ix = make_indexer<1>(shape, {&e.strides()}, "pow");
  dispatch(e.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {  // unsigned: never negative
      negative_exponent_kernel<T><<<grid_for(ctx, n, kThreads), kThreads, 0, ctx.stream>>>(
          e.data<T>(), ix, n, flag);
      PF_HIP_CHECK_LAUNCH();
    }
  });
}
}  // namespace

void Binary::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  // A scalar exponent was checked when the op was recorded.
  const int exponent = has_scalar() ? (scalar_side == 0 ? 0 : -1) : 1;
  if (op == BinaryOp::Pow && exponent >= 0 && is_integral(in[exponent].dtype()) &&
      in[exponent].dtype() != Dtype::Bool) {
    check_int_exponents(in[exponent], out.shape(), ctx);
  }
  visit_binary(op, [&](auto opc) {
    constexpr BinaryOp O = decltype(opc)::value;
    dispatch(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      using R = binary_out_t<decltype(opc), T>;
      if (has_scalar()) {
        // Converted as Full::eval_gpu stores it, then widened as a load is.
        const auto s = static_cast<acc_t<T>>(convert<T>(static_cast<acc_t<T>>(scalar)));
        launch_map<1, T, R>(out.data<R>(), {in[0].data<T>()}, out.shape(), {&in[0].strides()},
                            ScalarBinaryF<O, acc_t<T>>{s, scalar_side == 0}, ctx, name());
        return;
      }
      launch_map<2, T, R>(out.data<R>(), {in[0].data<T>(), in[1].data<T>()}, out.shape(),
                          {&in[0].strides(), &in[1].strides()}, BinaryF<O>{}, ctx, name());
    });
  });
}

void Where::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const int64_t n = out.size();
  Indexer<3> ix = make_indexer<3>(out.shape(), {&in[0].strides(), &in[1].strides(), &in[2].strides()}, name());
  dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    where_kernel<T><<<grid_for(ctx, n, kThreads), kThreads, 0, ctx.stream>>>(
        out.data<T>(), in[0].data<bool>(), in[1].data<T>(), in[2].data<T>(), ix, n);
    PF_HIP_CHECK_LAUNCH();
  });
}

void AsType::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  if (in[0].dtype() == out.dtype()) {
    if (!transpose_with_geam(in[0], out, ctx)) {
      copy_strided(out.dtype(), in[0].raw_data(), out.shape(), in[0].strides(), out.raw_data(), ctx);
    }
    return;
  }
  dispatch(in[0].dtype(), [&](auto from) {
    using T = decltype(from);
    dispatch(out.dtype(), [&](auto to) {
      using R = decltype(to);
      launch_map<1, T, R>(out.data<R>(), {in[0].data<T>()}, out.shape(), {&in[0].strides()},
                          ConvertF<R>{}, ctx, name());
    });
  });
}

}  // namespace pyflame
