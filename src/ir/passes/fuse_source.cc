#include "ir/passes/fuse_source.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "backend/reduce_shape.h"
#include "core/half.h"

namespace pyflame::fuse {

namespace {

using Kind = FusedStep::Kind;

// 16-bit conversions per platform: the instructions the prebuilt kernels use
// (gpu/device_utils.h). Contraction needs no barrier here: the formulas
// themselves never contract (elementwise_formulas.h).
const char* kPreamble = R"(
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
__device__ __forceinline__ float pf_h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short pf_f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ unsigned short pf_f2bf(float f) {
#if __CUDA_ARCH__ >= 800
  unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  unsigned int x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
#endif
}
#else
__device__ __forceinline__ float pf_h2f(unsigned short h) { return (float)__builtin_bit_cast(_Float16, h); }
__device__ __forceinline__ unsigned short pf_f2h(float f) { return __builtin_bit_cast(unsigned short, (_Float16)f); }
__device__ __forceinline__ unsigned short pf_f2bf(float f) {
  unsigned int x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
#endif
__device__ __forceinline__ float pf_bf2f(unsigned short h) { return __uint_as_float((unsigned int)h << 16); }
template <typename To, typename From> __device__ __forceinline__ To pf_float_to_small(From v) {
  const double d = (double)v;
  if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0)) return To(0);  // 2^63
  return (To)(long long)d;
}
__device__ __forceinline__ float pf_round_f16(float v) { return pf_h2f(pf_f2h(v)); }
__device__ __forceinline__ float pf_round_bf16(float v) { return pf_bf2f(pf_f2bf(v)); }
)";

// The arithmetic type of a dtype in generated code (the prebuilt kernels'
// acc_t: 16-bit floats compute in float, bool as int).
const char* acc(Dtype t) {
  switch (t) {
    case Dtype::Bool: return "bool";
    case Dtype::Int8: return "signed char";
    case Dtype::Int16: return "short";
    case Dtype::UInt8: return "unsigned char";
    case Dtype::Int32: return "int";
    case Dtype::Int64: return "long";
    case Dtype::Float64: return "double";
    default: return "float";
  }
}

const char* storage(Dtype t) {
  switch (t) {
    case Dtype::Float16:
    case Dtype::BFloat16: return "unsigned short";
    default: return acc(t);
  }
}

// A value rounded to its dtype.
std::string round_to(Dtype t, const std::string& e) {
  switch (t) {
    case Dtype::Float32: return "(" + e + ")";
    case Dtype::Float16: return "pf_round_f16(" + e + ")";
    case Dtype::BFloat16: return "pf_round_bf16(" + e + ")";
    case Dtype::Bool: return "(bool)(" + e + ")";
    default: return "(" + std::string(acc(t)) + ")(" + e + ")";
  }
}

// float64 computes in double (formulas::*_f64) but for the ops integers take too.
std::string unary_fn(UnaryOp op, Dtype t) {
  static const char* f[] = {"neg", "abs", "sqrt", "exp", "log", "sin", "cos", "tanh", "relu",
                            "sigmoid", "gelu", "gelu_tanh", "silu", "erf"};
  const bool f64 = t == Dtype::Float64 && op != UnaryOp::Neg && op != UnaryOp::Abs && op != UnaryOp::Relu;
  return std::string(f[int(op)]) + (f64 ? "_f64" : "");
}

std::string binary_expr(BinaryOp op, Dtype t, const std::string& a, const std::string& b) {
  // Binary ops on bool compute in int, as the prebuilt kernels do.
  const std::string A = t == Dtype::Bool ? "int" : acc(t);
  const std::string x = "(" + A + ")" + a, y = "(" + A + ")" + b;
  static const char* cmp[] = {"==", "!=", "<", "<=", ">", ">="};
  if (is_comparison(op)) return "(" + x + " " + cmp[int(op) - int(BinaryOp::Eq)] + " " + y + ")";
  static const char* f[] = {"add", "sub", "mul", "div", "pow", "max", "min"};
  return std::string("pyflame::formulas::") + f[int(op)] + "(" + x + ", " + y + ")";
}

std::string cast_expr(Dtype from, Dtype to, const std::string& v) {
  if (to == Dtype::Bool) return from == Dtype::Float64 ? "(" + v + " != 0.0)" : "((float)" + v + " != 0.0f)";
  if (to == Dtype::Float64) return "(double)" + v;
  // A float becomes an 8- or 16-bit integer through int64 (NaN and values
  // out of its range give 0), as the prebuilt kernels' convert does.
  if (is_floating(from) && is_integral(to) && itemsize(to) <= 2) {
    return "pf_float_to_small<" + std::string(acc(to)) + ">(" + v + ")";
  }
  return round_to(to, "(" + std::string(acc(to)) + ")(" + (is_floating(to) ? "(float)" : "") + v + ")");
}

std::string load_expr(Dtype t, const std::string& ptr) {
  if (t == Dtype::Float16) return "pf_h2f(" + ptr + ")";
  if (t == Dtype::BFloat16) return "pf_bf2f(" + ptr + ")";
  return ptr;
}

std::string store_expr(Dtype t, const std::string& v) {
  if (t == Dtype::Float16) return "pf_f2h(" + v + ")";
  if (t == Dtype::BFloat16) return "pf_f2bf(" + v + ")";
  return v;
}

// The formulas without their include guard (a main file for the compiler).
std::string formulas_text() {
  std::string t = kFormulasText;
  const std::string once = "#pragma once\n";
  if (auto p = t.find(once); p != std::string::npos) t.erase(p, once.size());
  return t;
}

}  // namespace

uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

KernelLayout kernel_layout(const FusedRegion& r) {
  KernelLayout L;
  std::vector<const Strides*> strided;
  for (const Node* p : r.loads) {
    bool contig = true, scalar = true;
    const Strides rm = row_major_strides(r.shape);
    for (size_t d = 0; d < r.shape.size(); ++d) {
      if (r.shape[d] == 1) continue;
      contig &= p->strides[d] == rm[d];
      scalar &= p->strides[d] == 0;
    }
    L.access.push_back(scalar ? Access::Scalar : contig ? Access::Contig : Access::Strided);
    if (L.access.back() == Access::Strided) strided.push_back(&p->strides);
  }
  // 32-bit indices when the index space and every strided load's reach
  // leave headroom (the grid-stride step must not overflow either).
  constexpr int64_t kNarrow = int64_t(1) << 30;
  L.narrow = shape_size(r.shape) < kNarrow;
  for (const Strides* st : strided) {
    int64_t reach = 0;
    for (size_t d = 0; d < r.shape.size(); ++d) reach += std::abs((*st)[d]) * std::max<int64_t>(r.shape[d] - 1, 0);
    L.narrow &= reach < kNarrow;
  }
  if (strided.empty()) return L;
  // Collapse as the prebuilt kernels' indexer does, over the strided loads.
  L.strides.resize(strided.size());
  for (size_t d = 0; d < r.shape.size(); ++d) {
    if (r.shape[d] == 1) continue;
    bool merge = !L.shape.empty();
    for (size_t k = 0; k < strided.size() && merge; ++k) {
      merge = L.strides[k].back() == (*strided[k])[d] * r.shape[d];
    }
    if (merge) {
      L.shape.back() *= r.shape[d];
      for (size_t k = 0; k < strided.size(); ++k) L.strides[k].back() = (*strided[k])[d];
    } else {
      L.shape.push_back(r.shape[d]);
      for (size_t k = 0; k < strided.size(); ++k) L.strides[k].push_back((*strided[k])[d]);
    }
  }
  return L;
}

namespace {

// The index decomposition and the steps at element `i` of the region's index
// space (type I), as statements defining v0..v<n-1>.
std::string steps_code(const FusedRegion& r, const KernelLayout& L, const std::string& I, const std::string& pad) {
  const int nd = int(L.shape.size());
  const int ns = int(L.strides.size());
  const int nl = int(r.loads.size());
  std::ostringstream k;
  if (nd) {
    k << pad << I << " off[" << ns << "] = {};\n" << pad << "{ " << I << " r = i;\n";
    k << pad << "  for (int d = " << nd - 1 << "; d >= 0; --d) { " << I << " e = (" << I << ")a.shape[d]; " << I
      << " q = r % e; r /= e;\n";
    k << pad << "    for (int s = 0; s < " << ns << "; ++s) off[s] += q * (" << I << ")a.strides[s][d]; } }\n";
  }
  int strided_slot = 0;
  std::vector<int> strided_of(nl, -1);
  for (int j = 0; j < nl; ++j) {
    if (L.access[j] == Access::Strided) strided_of[j] = strided_slot++;
  }
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const FusedStep& s = r.steps[i];
    const std::string v = "v" + std::to_string(i);
    auto arg = [&](int j) { return "v" + std::to_string(j); };
    k << pad << acc(s.dtype) << " " << v << " = ";
    switch (s.kind) {
      case Kind::Load: {
        const int j = s.slot;
        const std::string idx = L.access[j] == Access::Contig  ? "i"
                                : L.access[j] == Access::Scalar ? "0"
                                                                : "off[" + std::to_string(strided_of[j]) + "]";
        k << load_expr(s.dtype, "((const " + std::string(storage(s.dtype)) + "*)a.in[" + std::to_string(j) + "])[" +
                                    idx + "]");
        break;
      }
      case Kind::Scalar: {
        const std::string bits = "a.scalars[" + std::to_string(s.slot) + "]";
        if (s.dtype == Dtype::Float64) k << "__longlong_as_double((long long)" << bits << ")";
        else if (is_floating(s.dtype)) k << "__int_as_float((int)" << bits << ")";
        else if (s.dtype == Dtype::Bool) k << "(" << bits << " != 0)";
        else k << "(" << acc(s.dtype) << ")" << bits;
        break;
      }
      case Kind::Unary:
        k << round_to(s.dtype, "pyflame::formulas::" + unary_fn(UnaryOp(s.op), s.dtype) + "(" + arg(s.a) + ")");
        break;
      case Kind::Binary: {
        const Dtype t = r.steps[s.a].dtype;
        const std::string e = binary_expr(BinaryOp(s.op), t, arg(s.a), arg(s.b));
        k << (is_comparison(BinaryOp(s.op)) ? e : round_to(s.dtype, e));
        break;
      }
      case Kind::Where:
        k << "(" << arg(s.a) << " ? " << arg(s.b) << " : " << arg(s.c) << ")";
        break;
      case Kind::Cast:
        k << cast_expr(r.steps[s.a].dtype, s.dtype, arg(s.a));
        break;
    }
    k << ";\n";
  }
  return k.str();
}

// A reduction after the steps, as the prebuilt reduce kernel does it
// (kernels/reduce.hip, reduce_rows; backend/reduce_shape.h): rows of `cols`
// elements, each row split into `chunks` parts (a block each), threads
// striding over a part either one element or PF_VEC elements at a time, with
// PF_RED_LOADS accumulators in long rows, a wave butterfly and a block combine
// through shared memory; with chunks > 1 a second kernel reduces the parts
// with as many threads as the prebuilt kernel's last block. The same order,
// so the same bits: float accumulation for the 16- and 32-bit floats the GPU
// anchors admit.
std::string reduce_code(const FusedRegion& r, const KernelLayout& L) {
  const Dtype t = r.steps.back().dtype;
  const ReduceOp op = r.reduce_op;
  const int vec = 16 / int(itemsize(t)) > 8 ? 8 : 16 / int(itemsize(t));
  const std::string I = L.narrow ? "int" : "long";
  std::ostringstream k;
  const char* ident = op == ReduceOp::Max ? "__int_as_float(0xff800000)"
                      : op == ReduceOp::Min ? "__int_as_float(0x7f800000)" : "0.0f";
  k << "#define PF_VEC " << vec << "\n";
  k << "#define PF_RED_THREADS " << backend::kReduce.threads << "\n#define PF_RED_LOADS " << backend::kReduce.loads
    << "\n";
  k << "__device__ __forceinline__ float pf_ident() { return " << ident << "; }\n";
  k << "__device__ __forceinline__ float pf_combine(float a, float b) { return ";
  if (op == ReduceOp::Max) k << "(a > b || a != a) ? a : b";
  else if (op == ReduceOp::Min) k << "(a < b || a != a) ? a : b";
  else k << "a + b";
  k << "; }\n";
  k << R"(__device__ __forceinline__ float pf_shfl_xor(float v, int m) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  return __shfl_xor_sync(0xffffffffu, v, m, 32);
#else
  return __shfl_xor(v, m, PF_WAVE_SIZE);
#endif
}
__device__ __forceinline__ float pf_wave_reduce(float v) {
#pragma unroll
  for (int o = PF_WAVE_SIZE / 2; o > 0; o /= 2) v = pf_combine(v, pf_shfl_xor(v, o));
  return v;
}
__device__ float pf_block_reduce(float v) {
  __shared__ float part[32];
  const unsigned lane = threadIdx.x % PF_WAVE_SIZE, wave = threadIdx.x / PF_WAVE_SIZE;
  const unsigned waves = blockDim.x / PF_WAVE_SIZE;
  v = pf_wave_reduce(v);
  if (lane == 0) part[wave] = v;
  __syncthreads();
  v = lane < waves ? part[lane] : pf_ident();
  v = pf_wave_reduce(v);
  __syncthreads();
  return v;
}
)";
  k << "__device__ __forceinline__ float pf_value(const Args& a, " << I << " i) {\n"
    << steps_code(r, L, I, "  ") << "  return (float)v" << r.steps.size() - 1 << ";\n}\n";
  // The row's result, as the prebuilt kernel converts it (a mean divides in double).
  const std::string fin = op == ReduceOp::Mean ? "(float)((double)acc / (double)a.cols)" : "acc";
  k << "__device__ __forceinline__ void pf_finish(const Args& a, long row, float acc) {\n"
    << "  ((" << storage(t) << "*)a.out[0])[row] = " << store_expr(t, fin) << ";\n}\n\n";
  // A thread's part of a chunk, V elements a vector: U vectors in flight per step into U
  // accumulators, the rest into the first, then the accumulators in order.
  k << R"(template <int V, int U>
__device__ __forceinline__ float pf_chunk(const Args& a, long base, long start, long end) {
  float acc[U];
#pragma unroll
  for (int u = 0; u < U; ++u) acc[u] = pf_ident();
  const long T = blockDim.x, j_end = end / V;
  long j = start / V + threadIdx.x;
  for (; j + (U - 1) * T < j_end; j += U * T) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int q = 0; q < V; ++q) acc[u] = pf_combine(acc[u], pf_value(a, ()" << I << R"()(base + (j + u * T) * V + q)));
    }
  }
  for (; j < j_end; j += T) {
#pragma unroll
    for (int q = 0; q < V; ++q) acc[0] = pf_combine(acc[0], pf_value(a, ()" << I << R"()(base + j * V + q)));
  }
#pragma unroll
  for (int u = 1; u < U; ++u) acc[0] = pf_combine(acc[0], acc[u]);
  return acc[0];
}

extern "C" __global__ void __launch_bounds__(PF_RED_THREADS) KERNEL_NAME(Args a) {
  const long rows = a.rows, cols = a.cols, chunks = a.chunks;
  const long V = a.vec ? PF_VEC : 1;
  const long len = ((cols + chunks - 1) / chunks + V - 1) / V * V;
  const bool long_rows = blockDim.x == PF_RED_THREADS;
  for (long b = blockIdx.x; b < rows * chunks; b += gridDim.x) {
    const long row = b / chunks, start = (b % chunks) * len;
    const long end = start + len < cols ? start + len : cols;
    const long base = row * cols;
    float acc;
    if (a.vec) acc = long_rows ? pf_chunk<PF_VEC, PF_RED_LOADS>(a, base, start, end) : pf_chunk<PF_VEC, 1>(a, base, start, end);
    else acc = long_rows ? pf_chunk<1, PF_RED_LOADS>(a, base, start, end) : pf_chunk<1, 1>(a, base, start, end);
    acc = pf_block_reduce(acc);
    if (threadIdx.x == 0) {
      if (chunks > 1) ((float*)a.partial)[b] = acc;
      else pf_finish(a, row, acc);
    }
  }
}

extern "C" __global__ void __launch_bounds__(PF_RED_THREADS) KERNEL_NAME_parts(Args a) {
  const long rows = a.rows, parts = a.chunks;
  for (long b = blockIdx.x; b < rows; b += gridDim.x) {
    const float* p = (const float*)a.partial + b * parts;
    float acc = pf_ident();
    for (long j = threadIdx.x; j < parts; j += blockDim.x) acc = pf_combine(acc, p[j]);
    acc = pf_block_reduce(acc);
    if (threadIdx.x == 0) pf_finish(a, b, acc);
  }
}
)";
  return k.str();
}

}  // namespace

KernelSource kernel_source(const FusedRegion& r, const KernelLayout& L, int wave_size) {
  const int nd = int(L.shape.size());
  const int ns = int(L.strides.size());
  const int nl = int(r.loads.size());
  std::ostringstream k;
  k << "struct Args {\n  long n;\n";
  if (nd) k << "  long shape[" << nd << "];\n  long strides[" << ns << "][" << nd << "];\n";
  if (nl) k << "  const void* in[" << nl << "];\n";
  k << "  void* out[" << r.output_steps.size() << "];\n";
  if (!r.scalars.empty()) k << "  long scalars[" << r.scalars.size() << "];\n";
  if (r.reduce) k << "  long rows, cols, chunks, vec;\n  void* partial;\n";
  k << "};\n\n";
  const std::string I = L.narrow ? "int" : "long";
  if (r.reduce) {
    k << reduce_code(r, L);
  } else {
    k << "extern \"C\" __global__ void __launch_bounds__(256) KERNEL_NAME(Args a) {\n";
    k << "  const " << I << " n = (" << I << ")a.n;\n";
    k << "  for (" << I << " i = (" << I << ")blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (" << I
      << ")gridDim.x * blockDim.x) {\n";
    k << steps_code(r, L, I, "    ");
    for (size_t j = 0; j < r.output_steps.size(); ++j) {
      const int st = r.output_steps[j];
      const Dtype od = r.steps[st].dtype;
      k << "    ((" << storage(od) << "*)a.out[" << j << "])[i] = " << store_expr(od, "v" + std::to_string(st))
        << ";\n";
    }
    k << "  }\n}\n";
  }
  std::string body = k.str();
  std::ostringstream src;
  // Run-time compilers bring their own runtime header; an offline HIP
  // compile (the AMD compile check) needs it included.
  src << "// PyFlame fused region: " << r.describe() << "\n"
      << "#if defined(__HIP__) && !defined(__HIPCC_RTC__)\n#include <hip/hip_runtime.h>\n#endif\n"
      << "#define PF_WAVE_SIZE " << wave_size << "\n"
      << formulas_text() << kPreamble << "\n";
  std::string text = src.str() + body;
  char name[40];
  std::snprintf(name, sizeof(name), "pf_fused_%016llx", static_cast<unsigned long long>(fnv1a(text)));
  const std::string key = "KERNEL_NAME";
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at)) text.replace(at, key.size(), name);
  return {name, text};
}

std::vector<int64_t> kernel_args(const FusedRegion& r, const KernelLayout& L, const std::vector<const void*>& in,
                                 const std::vector<void*>& out, const ReduceGeometry& g) {
  std::vector<int64_t> a;
  a.push_back(shape_size(r.shape));
  for (int64_t d : L.shape) a.push_back(d);
  for (const Strides& s : L.strides) a.insert(a.end(), s.begin(), s.end());
  for (const void* p : in) a.push_back(int64_t(reinterpret_cast<uintptr_t>(p)));
  for (void* p : out) a.push_back(int64_t(reinterpret_cast<uintptr_t>(p)));
  // Scalars converted as the GPU's Full converts them, in the step's arithmetic type.
  for (const FusedStep& s : r.steps) {
    if (s.kind != Kind::Scalar) continue;
    const double v = r.scalars[s.slot];
    int64_t bits = 0;
    float f = 0;
    switch (s.dtype) {
      case Dtype::Float32: f = float(v); break;
      case Dtype::Float16: f = float(half_t(float(v))); break;
      case Dtype::BFloat16: f = float(bf16_t(float(v))); break;
      case Dtype::Int8: bits = int8_t(v); break;
      case Dtype::Int16: bits = int16_t(v); break;
      case Dtype::UInt8: bits = uint8_t(v); break;
      case Dtype::Int32: bits = int32_t(v); break;
      case Dtype::Int64: bits = int64_t(v); break;
      case Dtype::Bool: bits = float(int32_t(v)) != 0.0f; break;
      case Dtype::Float64: break;
    }
    if (s.dtype == Dtype::Float64) {
      std::memcpy(&bits, &v, 8);
    } else if (is_floating(s.dtype)) {
      uint32_t u;
      std::memcpy(&u, &f, 4);
      bits = int32_t(u);
    }
    a.push_back(bits);
  }
  if (r.reduce) {
    a.insert(a.end(), {g.rows, g.cols, g.chunks, int64_t(g.vec), int64_t(reinterpret_cast<uintptr_t>(g.partial))});
  }
  return a;
}

}  // namespace pyflame::fuse
