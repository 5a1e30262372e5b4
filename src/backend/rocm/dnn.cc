// DNN library wrapper: MIOpen (AMD) and cuDNN 9 legacy API (NVIDIA). See
// dnn.h. Library enums are mapped name to name per platform, never cast
// across libraries.
#include "backend/rocm/dnn.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>

#include "backend/rocm/gpu/libs.h"
#include "backend/rocm/gpu/platform.h"
#include "pyflame/backend/rocm.h"
#include "pyflame/backend/tuning.h"
#include "pyflame/errors.h"

namespace pyflame::backend::rocm {
// Stream-ordered scratch memory (kernels/elementwise.hip).
std::shared_ptr<Buffer> temp_buffer(DeviceContext& ctx, size_t bytes);
}  // namespace pyflame::backend::rocm

namespace pyflame::backend::rocm::dnn {

// ------------------------------------------------------------------ handles

struct DnnHandle {
  gpu::dnn_handle_t h = nullptr;
  std::mutex mu;  // a library handle serves one thread at a time
};

namespace {

// One handle per context, bound to its stream at creation and kept in the
// context (process lifetime, like it): found without a lock once made.
DnnHandle& handle_for(DeviceContext& ctx) {
  if (DnnHandle* h = ctx.dnn.load(std::memory_order_acquire)) return *h;
  static std::mutex mu;  // creation only
  std::lock_guard lk(mu);
  if (!ctx.dnn.load()) {
    DeviceGuard g(ctx.device);
    auto h = std::make_unique<DnnHandle>();
    h->h = gpu::create_dnn_handle(ctx.stream);
    ctx.dnn.store(h.release(), std::memory_order_release);
  }
  return *ctx.dnn.load();
}

}  // namespace

gpu::dnn_handle_t handle(DeviceContext& ctx) { return handle_for(ctx).h; }

namespace {

const std::string& arch_of(int device) {
  // Found without a lock once known (process lifetime).
  static std::atomic<const std::string*> archs[kMaxDevices];
  static std::mutex mu;
  if (const std::string* a = archs[device].load(std::memory_order_acquire)) return *a;
  std::lock_guard lk(mu);
  if (!archs[device].load()) archs[device].store(new std::string(gpu::device_arch(device)), std::memory_order_release);
  return *archs[device].load();
}

const std::string& library_tag() {
  static const std::string tag = [] {
#if defined(__HIP_PLATFORM_AMD__)
    size_t ma = 0, mi = 0, pa = 0;
    PF_DNN_CHECK(miopenGetVersion(&ma, &mi, &pa));
    return "miopen" + std::to_string(ma) + "." + std::to_string(mi) + "." + std::to_string(pa);
#else
    return "cudnn" + std::to_string(cudnnGetVersion());
#endif
  }();
  return tag;
}

// ------------------------------------------------------------------ shapes

constexpr size_t kMaxWorkspace = size_t(1) << 30;  // the most a convolution may ask for

int to_int(int64_t v, const char* fn) {
  if (v > INT_MAX || v < 0) {
    throw ValueError(errmsg(fn, "a size of " + std::to_string(v) + " exceeds the DNN library's 32-bit range"));
  }
  return static_cast<int>(v);
}

std::vector<int> ints(const std::vector<int64_t>& v, const char* fn) {
  std::vector<int> out;
  for (int64_t e : v) out.push_back(to_int(e, fn));
  return out;
}

std::vector<int> packed_strides(const std::vector<int>& dims) {
  std::vector<int> st(dims.size(), 1);
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * std::max(dims[d + 1], 1);
  return st;
}

// 1-d problems as 2-d: a unit axis before the length, with unit geometry.
struct Lifted {
  std::vector<int> x, w, y, pad, stride, dil;
  int nsp = 0;
};

Lifted lift(const ConvProblem& p, const char* fn) {
  Lifted L;
  L.x = ints(p.x, fn);
  L.w = ints(p.w, fn);
  L.y = ints(p.y, fn);
  L.pad = ints(p.padding, fn);
  L.stride = ints(p.stride, fn);
  L.dil = ints(p.dilation, fn);
  if (L.x.size() == 3) {
    L.x.insert(L.x.begin() + 2, 1);
    L.w.insert(L.w.begin() + 2, 1);
    L.y.insert(L.y.begin() + 2, 1);
    L.pad.insert(L.pad.begin(), 0);
    L.stride.insert(L.stride.begin(), 1);
    L.dil.insert(L.dil.begin(), 1);
  }
  L.nsp = static_cast<int>(L.x.size()) - 2;
  return L;
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

// The tuning-cache key of a convolution problem.
std::string conv_key(const char* op, const Lifted& L, Dtype dt, int64_t groups, int device) {
  std::ostringstream k;
  k << op << '|' << library_tag() << '|' << arch_of(device) << '|' << dtype_name(dt)
    << "|tf32=" << (dt == Dtype::Float32 && allow_tf32() ? 1 : 0) << "|x=" << join(L.x) << "|w=" << join(L.w)
    << "|y=" << join(L.y) << "|p=" << join(L.pad) << "|s=" << join(L.stride) << "|d=" << join(L.dil)
    << "|g=" << groups;
  return k.str();
}

// Scratch for a search: as much as asked (up to kMaxWorkspace), less when
// memory is short.
std::shared_ptr<Buffer> search_workspace(DeviceContext& ctx, size_t& bytes) {
  bytes = std::min(bytes, kMaxWorkspace);
  while (bytes > 0) {
    try {
      return temp_buffer(ctx, bytes);
    } catch (const OutOfMemoryError&) {
      bytes /= 4;
      if (bytes < (size_t(1) << 20)) bytes = 0;
    }
  }
  return nullptr;
}

std::shared_ptr<Buffer> run_workspace(DeviceContext& ctx, size_t bytes) {
  return bytes ? temp_buffer(ctx, bytes) : nullptr;
}

void* ptr_of(const std::shared_ptr<Buffer>& b) { return b ? b->ptr : nullptr; }

// Splits the batch so that every chunk's x and y stay within 32-bit element
// counts (the legacy DNN APIs index with int), calling f(n0, n).
template <typename F>
void for_batch_chunks(const ConvProblem& p, const char* fn, F&& f) {
  const int64_t N = p.x[0];
  const int64_t per = std::max(shape_size(p.x) / std::max<int64_t>(N, 1), shape_size(p.y) / std::max<int64_t>(N, 1));
  const int64_t max_n = per > 0 ? INT_MAX / per : N;
  if (max_n < 1) {
    throw ValueError(errmsg(fn, "one sample of " + std::to_string(per) +
                                    " elements exceeds the DNN library's 32-bit range"));
  }
  for (int64_t n0 = 0; n0 < N; n0 += max_n) f(n0, std::min(max_n, N - n0));
}

ConvProblem with_batch(const ConvProblem& p, int64_t n) {
  ConvProblem q = p;
  q.x[0] = n;
  q.y[0] = n;
  return q;
}

#if defined(__HIP_PLATFORM_AMD__)
// ================================================================== MIOpen

miopenDataType_t dnn_type(Dtype t) {
  switch (t) {
    case Dtype::Float16: return miopenHalf;
    case Dtype::BFloat16: return miopenBFloat16;
    default: return miopenFloat;
  }
}

bool soft_failure(miopenStatus_t st) {
  return st == miopenStatusBadParm || st == miopenStatusNotImplemented || st == miopenStatusUnsupportedOp;
}

struct TensorDesc {
  miopenTensorDescriptor_t d = nullptr;
  TensorDesc() { PF_DNN_CHECK(miopenCreateTensorDescriptor(&d)); }
  ~TensorDesc() { miopenDestroyTensorDescriptor(d); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  miopenStatus_t set(miopenDataType_t t, const std::vector<int>& dims) {
    std::vector<int> st = packed_strides(dims);
    return miopenSetTensorDescriptor(d, t, static_cast<int>(dims.size()), dims.data(), st.data());
  }
};

struct ConvDesc {
  miopenConvolutionDescriptor_t d = nullptr;
  ConvDesc() { PF_DNN_CHECK(miopenCreateConvolutionDescriptor(&d)); }
  ~ConvDesc() { miopenDestroyConvolutionDescriptor(d); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

struct PoolDesc {
  miopenPoolingDescriptor_t d = nullptr;
  PoolDesc() { PF_DNN_CHECK(miopenCreatePoolingDescriptor(&d)); }
  ~PoolDesc() { miopenDestroyPoolingDescriptor(d); }
  PoolDesc(const PoolDesc&) = delete;
  PoolDesc& operator=(const PoolDesc&) = delete;
};

struct ConvDescs {
  TensorDesc x, w, y;
  ConvDesc conv;
};

void set_conv_descs(ConvDescs& D, const Lifted& L, Dtype dt, int64_t groups) {
  const miopenDataType_t t = dnn_type(dt);
  PF_DNN_CHECK(D.x.set(t, L.x));
  PF_DNN_CHECK(D.w.set(t, L.w));
  PF_DNN_CHECK(D.y.set(t, L.y));
  PF_DNN_CHECK(miopenInitConvolutionNdDescriptor(D.conv.d, L.nsp, L.pad.data(), L.stride.data(), L.dil.data(),
                                                 miopenConvolution));
  PF_DNN_CHECK(miopenSetConvolutionGroupCount(D.conv.d, static_cast<int>(groups)));
}

// Per-direction MIOpen calls for conv_chunk. The output is y for the forward
// pass and x for the backward-data pass (conv_transpose).
struct ConvFwd {
  using XPtr = const void*;
  using WPtr = const void*;
  using YPtr = void*;
  static constexpr const char* fn = "conv";
  static constexpr const char* key_prefix = "conv_fwd";
  static miopenStatus_t solution_workspace(DnnHandle& H, const ConvDescs& D, uint64_t solution, size_t* ws) {
    return miopenConvolutionForwardGetSolutionWorkspaceSize(H.h, D.w.d, D.x.d, D.conv.d, D.y.d, solution, ws);
  }
  static void find_workspace(DnnHandle& H, const ConvDescs& D, size_t& find_ws) {
    PF_DNN_CHECK(miopenConvolutionForwardGetWorkSpaceSize(H.h, D.w.d, D.x.d, D.conv.d, D.y.d, &find_ws));
  }
  static void find(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, miopenConvAlgoPerf_t* perf,
                   int& n, const std::shared_ptr<Buffer>& buf, size_t find_ws) {
    PF_DNN_CHECK(miopenFindConvolutionForwardAlgorithm(H.h, D.x.d, x, D.w.d, w, D.conv.d, D.y.d, y, 8, &n, perf,
                                                       ptr_of(buf), find_ws, true));
  }
  static void solution_count(DnnHandle& H, const ConvDescs& D, size_t& count) {
    PF_DNN_CHECK(miopenConvolutionForwardGetSolutionCount(H.h, D.w.d, D.x.d, D.conv.d, D.y.d, &count));
  }
  static void solutions(DnnHandle& H, const ConvDescs& D, std::vector<miopenConvSolution_t>& sols, size_t& count) {
    PF_DNN_CHECK(miopenConvolutionForwardGetSolution(H.h, D.w.d, D.x.d, D.conv.d, D.y.d, sols.size(), &count,
                                                     sols.data()));
  }
  static void compile(DnnHandle& H, const ConvDescs& D, uint64_t solution) {
    PF_DNN_CHECK(miopenConvolutionForwardCompileSolution(H.h, D.w.d, D.x.d, D.conv.d, D.y.d, solution));
  }
  static void run(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, const std::shared_ptr<Buffer>& buf,
                  size_t ws, uint64_t solution) {
    PF_DNN_CHECK(miopenConvolutionForwardImmediate(H.h, D.w.d, w, D.x.d, x, D.conv.d, D.y.d, y, ptr_of(buf), ws,
                                                   solution));
  }
};

struct ConvBwdData {
  using XPtr = void*;
  using WPtr = const void*;
  using YPtr = const void*;
  static constexpr const char* fn = "conv_transpose";
  static constexpr const char* key_prefix = "conv_bwd_data";
  static miopenStatus_t solution_workspace(DnnHandle& H, const ConvDescs& D, uint64_t solution, size_t* ws) {
    return miopenConvolutionBackwardDataGetSolutionWorkspaceSize(H.h, D.y.d, D.w.d, D.conv.d, D.x.d, solution, ws);
  }
  static void find_workspace(DnnHandle& H, const ConvDescs& D, size_t& find_ws) {
    PF_DNN_CHECK(miopenConvolutionBackwardDataGetWorkSpaceSize(H.h, D.y.d, D.w.d, D.conv.d, D.x.d, &find_ws));
  }
  static void find(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, miopenConvAlgoPerf_t* perf,
                   int& n, const std::shared_ptr<Buffer>& buf, size_t find_ws) {
    PF_DNN_CHECK(miopenFindConvolutionBackwardDataAlgorithm(H.h, D.y.d, y, D.w.d, w, D.conv.d, D.x.d, x, 8, &n,
                                                            perf, ptr_of(buf), find_ws, true));
  }
  static void solution_count(DnnHandle& H, const ConvDescs& D, size_t& count) {
    PF_DNN_CHECK(miopenConvolutionBackwardDataGetSolutionCount(H.h, D.y.d, D.w.d, D.conv.d, D.x.d, &count));
  }
  static void solutions(DnnHandle& H, const ConvDescs& D, std::vector<miopenConvSolution_t>& sols, size_t& count) {
    PF_DNN_CHECK(miopenConvolutionBackwardDataGetSolution(H.h, D.y.d, D.w.d, D.conv.d, D.x.d, sols.size(), &count,
                                                          sols.data()));
  }
  static void compile(DnnHandle& H, const ConvDescs& D, uint64_t solution) {
    PF_DNN_CHECK(miopenConvolutionBackwardDataCompileSolution(H.h, D.y.d, D.w.d, D.conv.d, D.x.d, solution));
  }
  static void run(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, const std::shared_ptr<Buffer>& buf,
                  size_t ws, uint64_t solution) {
    PF_DNN_CHECK(miopenConvolutionBackwardDataImmediate(H.h, D.y.d, y, D.w.d, w, D.conv.d, D.x.d, x, ptr_of(buf), ws,
                                                        solution));
  }
};

// The backward-weights pass (the weight gradient): w is the output, x and y
// (the output cotangent) the inputs.
struct ConvBwdWeights {
  using XPtr = const void*;
  using WPtr = void*;
  using YPtr = const void*;
  static constexpr const char* fn = "conv_weight_grad";
  static constexpr const char* key_prefix = "conv_bwd_weights";
  static miopenStatus_t solution_workspace(DnnHandle& H, const ConvDescs& D, uint64_t solution, size_t* ws) {
    return miopenConvolutionBackwardWeightsGetSolutionWorkspaceSize(H.h, D.y.d, D.x.d, D.conv.d, D.w.d, solution, ws);
  }
  static void find_workspace(DnnHandle& H, const ConvDescs& D, size_t& find_ws) {
    PF_DNN_CHECK(miopenConvolutionBackwardWeightsGetWorkSpaceSize(H.h, D.y.d, D.x.d, D.conv.d, D.w.d, &find_ws));
  }
  static void find(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, miopenConvAlgoPerf_t* perf, int& n,
                   const std::shared_ptr<Buffer>& buf, size_t find_ws) {
    PF_DNN_CHECK(miopenFindConvolutionBackwardWeightsAlgorithm(H.h, D.y.d, y, D.x.d, x, D.conv.d, D.w.d, w, 8, &n,
                                                               perf, ptr_of(buf), find_ws, true));
  }
  static void solution_count(DnnHandle& H, const ConvDescs& D, size_t& count) {
    PF_DNN_CHECK(miopenConvolutionBackwardWeightsGetSolutionCount(H.h, D.y.d, D.x.d, D.conv.d, D.w.d, &count));
  }
  static void solutions(DnnHandle& H, const ConvDescs& D, std::vector<miopenConvSolution_t>& sols, size_t& count) {
    PF_DNN_CHECK(miopenConvolutionBackwardWeightsGetSolution(H.h, D.y.d, D.x.d, D.conv.d, D.w.d, sols.size(), &count,
                                                             sols.data()));
  }
  static void compile(DnnHandle& H, const ConvDescs& D, uint64_t solution) {
    PF_DNN_CHECK(miopenConvolutionBackwardWeightsCompileSolution(H.h, D.y.d, D.x.d, D.conv.d, D.w.d, solution));
  }
  static void run(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, const std::shared_ptr<Buffer>& buf,
                  size_t ws, uint64_t solution) {
    PF_DNN_CHECK(miopenConvolutionBackwardWeightsImmediate(H.h, D.y.d, y, D.x.d, x, D.conv.d, D.w.d, w, ptr_of(buf),
                                                           ws, solution));
  }
};

// Solution selection shared by all directions: tuning-cache hit, else
// (optionally) Find to fill MIOpen's find-db, then GetSolution, compile, cache.
template <class Dir>
void conv_chunk(DeviceContext& ctx, const ConvProblem& p, typename Dir::XPtr x, typename Dir::WPtr w,
                typename Dir::YPtr y) {
  const char* fn = Dir::fn;
  const Lifted L = lift(p, fn);
  ConvDescs D;
  set_conv_descs(D, L, p.dtype, p.groups);
  DnnHandle& H = handle_for(ctx);
  std::lock_guard lk(H.mu);
  MIOpenTuningCache& cache = get_tuning_cache();
  const std::string key = conv_key(Dir::key_prefix, L, p.dtype, p.groups, ctx.device);
  uint64_t solution = 0;
  size_t ws = 0;
  bool have = false;
  if (auto e = cache.lookup(key)) {
    solution = e->algo;
    have = Dir::solution_workspace(H, D, solution, &ws) == miopenStatusSuccess;
  }
  if (!have) {
    const bool exhaustive = cache.exhaustive_search();
    if (exhaustive) {
      // Find times the candidates and records them in MIOpen's find-db,
      // which GetSolution then ranks by.
      size_t find_ws = 0;
      Dir::find_workspace(H, D, find_ws);
      auto buf = search_workspace(ctx, find_ws);
      miopenConvAlgoPerf_t perf[8];
      int n = 0;
      Dir::find(H, D, x, w, y, perf, n, buf, find_ws);
    }
    size_t count = 0;
    Dir::solution_count(H, D, count);
    std::vector<miopenConvSolution_t> sols(std::max<size_t>(count, 1));
    Dir::solutions(H, D, sols, count);
    size_t pick = count;
    for (size_t i = 0; i < count && pick == count; ++i) {
      if (sols[i].workspace_size <= kMaxWorkspace) pick = i;
    }
    if (pick == count) throw RuntimeError(errmsg(fn, "MIOpen has no solution for this convolution: " + key));
    solution = sols[pick].solution_id;
    ws = sols[pick].workspace_size;
    Dir::compile(H, D, solution);
    cache.insert(key, {solution, ws, 0, exhaustive});
  }
  auto buf = run_workspace(ctx, ws);
  Dir::run(H, D, x, w, y, buf, ws, solution);
}

void conv_forward_chunk(DeviceContext& ctx, const ConvProblem& p, const void* x, const void* w, void* y) {
  conv_chunk<ConvFwd>(ctx, p, x, w, y);
}

void conv_backward_data_chunk(DeviceContext& ctx, const ConvProblem& p, void* x, const void* w, const void* y) {
  conv_chunk<ConvBwdData>(ctx, p, x, w, y);
}

void conv_backward_weights_chunk(DeviceContext& ctx, const ConvProblem& p, const void* x, void* w, const void* y) {
  conv_chunk<ConvBwdWeights>(ctx, p, x, w, y);
}

// dst += src for two dense tensors of `dims`: C = 1 * A + 0 * B + 1 * C with
// A = B = src, so that no input aliases the output.
void accumulate(DeviceContext& ctx, Dtype dtype, const std::vector<int>& dims, void* dst, const void* src) {
  TensorDesc D;
  PF_DNN_CHECK(D.set(dnn_type(dtype), dims));
  DnnHandle& H = handle_for(ctx);
  std::lock_guard lk(H.mu);
  const float one = 1.0f, zero = 0.0f;
  PF_DNN_CHECK(miopenOpTensor(H.h, miopenTensorOpAdd, &one, D.d, src, &zero, D.d, src, &one, D.d, dst));
}

// Descriptors of a pooling problem; false when MIOpen cannot describe it.
bool set_pool_descs(TensorDesc& xD, TensorDesc& yD, PoolDesc& pD, Dtype dtype, PoolMode mode,
                    const std::vector<int>& xd, const std::vector<int>& yd, const std::vector<int>& k,
                    const std::vector<int>& s, const std::vector<int>& p) {
  if (dtype == Dtype::BFloat16) return false;
  const miopenDataType_t t = dnn_type(dtype);
  if (xD.set(t, xd) != miopenStatusSuccess || yD.set(t, yd) != miopenStatusSuccess) return false;
  const miopenPoolingMode_t m = mode == PoolMode::Max             ? miopenPoolingMax
                                : mode == PoolMode::AvgIncludePad ? miopenPoolingAverageInclusive
                                                                  : miopenPoolingAverage;
  return miopenSetNdPoolingDescriptor(pD.d, m, static_cast<int>(k.size()), k.data(), p.data(), s.data()) ==
         miopenStatusSuccess;
}

bool pool_forward_impl(DeviceContext& ctx, Dtype dtype, PoolMode mode, const std::vector<int>& xd,
                       const void* x, const std::vector<int>& yd, void* y, const std::vector<int>& k,
                       const std::vector<int>& s, const std::vector<int>& p) {
  TensorDesc xD, yD;
  PoolDesc pD;
  if (dtype == Dtype::Float64) return false;  // our kernels (the library's double path is not wired in)
  if (!set_pool_descs(xD, yD, pD, dtype, mode, xd, yd, k, s, p)) return false;
  DnnHandle& H = handle_for(ctx);
  std::lock_guard lk(H.mu);
  const float alpha = 1.0f, beta = 0.0f;
  const miopenStatus_t st = miopenPoolingForward(H.h, pD.d, &alpha, xD.d, x, &beta, yD.d, y, false, nullptr, 0);
  if (soft_failure(st)) return false;
  PF_DNN_CHECK(st);
  return true;
}

// Average pooling's backward pass needs no workspace (only max pooling
// reads the indices a forward pass records).
bool pool_backward_impl(DeviceContext& ctx, Dtype dtype, PoolMode mode, const std::vector<int>& xd, const void* x,
                        void* dx, const std::vector<int>& yd, const void* y, const void* dy,
                        const std::vector<int>& k, const std::vector<int>& s, const std::vector<int>& p) {
  TensorDesc xD, yD;
  PoolDesc pD;
  if (dtype == Dtype::Float64) return false;  // our kernels (the library's double path is not wired in)
  if (!set_pool_descs(xD, yD, pD, dtype, mode, xd, yd, k, s, p)) return false;
  DnnHandle& H = handle_for(ctx);
  std::lock_guard lk(H.mu);
  const float alpha = 1.0f, beta = 0.0f;
  const miopenStatus_t st =
      miopenPoolingBackward(H.h, pD.d, &alpha, yD.d, y, yD.d, dy, xD.d, x, &beta, xD.d, dx, nullptr);
  if (soft_failure(st)) return false;
  PF_DNN_CHECK(st);
  return true;
}

bool batch_norm_inference_impl(DeviceContext& ctx, Dtype dtype, const std::vector<int>& xd, const void* x, void* y,
                               const float* scale, const float* bias, const float* mean, const float* var,
                               double eps) {
  if (dtype == Dtype::BFloat16 || dtype == Dtype::Float64 || eps <= 0) return false;  // MIOpen asks for a positive epsilon
  TensorDesc xD, bnD;
  if (xD.set(dnn_type(dtype), xd) != miopenStatusSuccess) return false;
  if (miopenDeriveBNTensorDescriptor(bnD.d, xD.d, miopenBNSpatial) != miopenStatusSuccess) return false;
  // Our per-channel vectors are float32: older MIOpen derives the input's type.
  miopenDataType_t bn_type{};
  int n = 0, c = 0, h = 0, wd = 0, ns = 0, cs = 0, hs = 0, ws = 0;
  if (miopenGet4dTensorDescriptor(bnD.d, &bn_type, &n, &c, &h, &wd, &ns, &cs, &hs, &ws) != miopenStatusSuccess ||
      bn_type != miopenFloat) {
    return false;
  }
  DnnHandle& H = handle_for(ctx);
  std::lock_guard lk(H.mu);
  float alpha = 1.0f, beta = 0.0f;
  const miopenStatus_t st = miopenBatchNormalizationForwardInference(
      H.h, miopenBNSpatial, &alpha, &beta, xD.d, x, xD.d, y, bnD.d, const_cast<float*>(scale),
      const_cast<float*>(bias), const_cast<float*>(mean), const_cast<float*>(var), eps);
  if (soft_failure(st)) return false;
  PF_DNN_CHECK(st);
  return true;
}

#else
// ================================================================== cuDNN

cudnnDataType_t dnn_type(Dtype t) {
  switch (t) {
    case Dtype::Float16: return CUDNN_DATA_HALF;
    case Dtype::BFloat16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
  }
}

bool soft_failure(cudnnStatus_t st) {
  const int cat = CUDNN_STATUS_CATEGORY(static_cast<int>(st));
  return cat == CUDNN_STATUS_BAD_PARAM || cat == CUDNN_STATUS_NOT_SUPPORTED;
}

struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc() { PF_DNN_CHECK(cudnnCreateTensorDescriptor(&d)); }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  cudnnStatus_t set(cudnnDataType_t t, const std::vector<int>& dims) {
    std::vector<int> st = packed_strides(dims);
    return cudnnSetTensorNdDescriptor(d, t, static_cast<int>(dims.size()), dims.data(), st.data());
  }
};

struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc() { PF_DNN_CHECK(cudnnCreateFilterDescriptor(&d)); }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(d); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};

struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc() { PF_DNN_CHECK(cudnnCreateConvolutionDescriptor(&d)); }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(d); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

struct PoolDesc {
  cudnnPoolingDescriptor_t d = nullptr;
  PoolDesc() { PF_DNN_CHECK(cudnnCreatePoolingDescriptor(&d)); }
  ~PoolDesc() { cudnnDestroyPoolingDescriptor(d); }
  PoolDesc(const PoolDesc&) = delete;
  PoolDesc& operator=(const PoolDesc&) = delete;
};

struct ConvDescs {
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv;
};

// fp32 without TF32 uses FMA math only; 16-bit types may use tensor cores
// (fp32 accumulation through the FLOAT compute type).
cudnnMathType_t requested_math(Dtype dt) {
  if (dt == Dtype::Float32) return allow_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  return CUDNN_TENSOR_OP_MATH;
}

cudnnMathType_t usable_math(Dtype dt, cudnnMathType_t found) {
  return dt == Dtype::Float32 && !allow_tf32() ? CUDNN_FMA_MATH : found;
}

cudnnMathType_t math_from_int(int32_t m) {
  switch (m) {
    case 0: return CUDNN_DEFAULT_MATH;
    case 1: return CUDNN_TENSOR_OP_MATH;
    case 2: return CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    default: return CUDNN_FMA_MATH;
  }
}

int32_t math_to_int(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return 0;
    case CUDNN_TENSOR_OP_MATH: return 1;
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return 2;
    default: return 3;
  }
}

void set_conv_descs(ConvDescs& D, const Lifted& L, Dtype dt, int64_t groups) {
  const cudnnDataType_t t = dnn_type(dt);
  PF_DNN_CHECK(D.x.set(t, L.x));
  PF_DNN_CHECK(D.y.set(t, L.y));
  PF_DNN_CHECK(cudnnSetFilterNdDescriptor(D.w.d, t, CUDNN_TENSOR_NCHW, static_cast<int>(L.w.size()), L.w.data()));
  PF_DNN_CHECK(cudnnSetConvolutionNdDescriptor(D.conv.d, L.nsp, L.pad.data(), L.stride.data(), L.dil.data(),
                                               CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  PF_DNN_CHECK(cudnnSetConvolutionGroupCount(D.conv.d, static_cast<int>(groups)));
  PF_DNN_CHECK(cudnnSetConvolutionMathType(D.conv.d, requested_math(dt)));
}

// Picks the first successful result (results come best first) that fits
// the workspace limit.
template <typename Perf>
const Perf* first_usable(const Perf* perf, int n, size_t limit) {
  for (int i = 0; i < n; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= limit) return &perf[i];
  }
  return nullptr;
}

// Per-direction cuDNN calls for conv_chunk. The output is y for the forward
// pass and x for the backward-data pass (conv_transpose).
struct ConvFwd {
  using XPtr = const void*;
  using WPtr = const void*;
  using YPtr = void*;
  using Algo = cudnnConvolutionFwdAlgo_t;
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  static constexpr int kAlgoCount = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  static constexpr const char* fn = "conv";
  static constexpr const char* key_prefix = "conv_fwd";
  static cudnnStatus_t workspace(DnnHandle& H, const ConvDescs& D, Algo algo, size_t* ws) {
    return cudnnGetConvolutionForwardWorkspaceSize(H.h, D.x.d, D.w.d, D.conv.d, D.y.d, algo, ws);
  }
  static void workspace_checked(DnnHandle& H, const ConvDescs& D, Algo algo, size_t& ws) {
    PF_DNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(H.h, D.x.d, D.w.d, D.conv.d, D.y.d, algo, &ws));
  }
  static void find(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, Perf* perf, int& n,
                   const std::shared_ptr<Buffer>& buf, size_t find_ws) {
    PF_DNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(H.h, D.x.d, x, D.w.d, w, D.conv.d, D.y.d, y,
                                                        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf, ptr_of(buf),
                                                        find_ws));
  }
  static void get(DnnHandle& H, const ConvDescs& D, Perf* perf, int& n) {
    PF_DNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(H.h, D.x.d, D.w.d, D.conv.d, D.y.d,
                                                        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf));
  }
  static void run(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, Algo algo,
                  const std::shared_ptr<Buffer>& buf, size_t ws) {
    const float alpha = 1.0f, beta = 0.0f;
    PF_DNN_CHECK(cudnnConvolutionForward(H.h, &alpha, D.x.d, x, D.w.d, w, D.conv.d, algo, ptr_of(buf), ws, &beta,
                                         D.y.d, y));
  }
};

struct ConvBwdData {
  using XPtr = void*;
  using WPtr = const void*;
  using YPtr = const void*;
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  static constexpr int kAlgoCount = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  static constexpr const char* fn = "conv_transpose";
  static constexpr const char* key_prefix = "conv_bwd_data";
  static cudnnStatus_t workspace(DnnHandle& H, const ConvDescs& D, Algo algo, size_t* ws) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(H.h, D.w.d, D.y.d, D.conv.d, D.x.d, algo, ws);
  }
  static void workspace_checked(DnnHandle& H, const ConvDescs& D, Algo algo, size_t& ws) {
    PF_DNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(H.h, D.w.d, D.y.d, D.conv.d, D.x.d, algo, &ws));
  }
  static void find(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, Perf* perf, int& n,
                   const std::shared_ptr<Buffer>& buf, size_t find_ws) {
    PF_DNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(H.h, D.w.d, w, D.y.d, y, D.conv.d, D.x.d, x,
                                                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf,
                                                             ptr_of(buf), find_ws));
  }
  static void get(DnnHandle& H, const ConvDescs& D, Perf* perf, int& n) {
    PF_DNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(H.h, D.w.d, D.y.d, D.conv.d, D.x.d,
                                                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf));
  }
  static void run(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, Algo algo,
                  const std::shared_ptr<Buffer>& buf, size_t ws) {
    const float alpha = 1.0f, beta = 0.0f;
    PF_DNN_CHECK(cudnnConvolutionBackwardData(H.h, &alpha, D.w.d, w, D.y.d, y, D.conv.d, algo, ptr_of(buf), ws,
                                              &beta, D.x.d, x));
  }
};

// The backward-filter pass (the weight gradient): w is the output, x and y
// (the output cotangent) the inputs.
struct ConvBwdWeights {
  using XPtr = const void*;
  using WPtr = void*;
  using YPtr = const void*;
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  static constexpr int kAlgoCount = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  static constexpr const char* fn = "conv_weight_grad";
  static constexpr const char* key_prefix = "conv_bwd_weights";
  static cudnnStatus_t workspace(DnnHandle& H, const ConvDescs& D, Algo algo, size_t* ws) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(H.h, D.x.d, D.y.d, D.conv.d, D.w.d, algo, ws);
  }
  static void workspace_checked(DnnHandle& H, const ConvDescs& D, Algo algo, size_t& ws) {
    PF_DNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(H.h, D.x.d, D.y.d, D.conv.d, D.w.d, algo, &ws));
  }
  static void find(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, Perf* perf, int& n,
                   const std::shared_ptr<Buffer>& buf, size_t find_ws) {
    PF_DNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(H.h, D.x.d, x, D.y.d, y, D.conv.d, D.w.d, w,
                                                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf,
                                                               ptr_of(buf), find_ws));
  }
  static void get(DnnHandle& H, const ConvDescs& D, Perf* perf, int& n) {
    PF_DNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(H.h, D.x.d, D.y.d, D.conv.d, D.w.d,
                                                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf));
  }
  static void run(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, Algo algo,
                  const std::shared_ptr<Buffer>& buf, size_t ws) {
    const float alpha = 1.0f, beta = 0.0f;
    PF_DNN_CHECK(cudnnConvolutionBackwardFilter(H.h, &alpha, D.x.d, x, D.y.d, y, D.conv.d, algo, ptr_of(buf), ws,
                                                &beta, D.w.d, w));
  }
};

// Algorithm selection shared by all directions: tuning-cache hit (algo and
// math type), else exhaustive FindEx or heuristic Get_v7, then cache.
template <class Dir>
void conv_chunk(DeviceContext& ctx, const ConvProblem& p, typename Dir::XPtr x, typename Dir::WPtr w,
                typename Dir::YPtr y) {
  using Algo = typename Dir::Algo;
  using Perf = typename Dir::Perf;
  const char* fn = Dir::fn;
  const Lifted L = lift(p, fn);
  ConvDescs D;
  set_conv_descs(D, L, p.dtype, p.groups);
  DnnHandle& H = handle_for(ctx);
  std::lock_guard lk(H.mu);
  MIOpenTuningCache& cache = get_tuning_cache();
  const std::string key = conv_key(Dir::key_prefix, L, p.dtype, p.groups, ctx.device);
  Algo algo{};
  cudnnMathType_t math = requested_math(p.dtype);
  size_t ws = 0;
  bool have = false;
  if (auto e = cache.lookup(key)) {
    algo = static_cast<Algo>(e->algo);
    math = math_from_int(e->math);
    have = cudnnSetConvolutionMathType(D.conv.d, math) == CUDNN_STATUS_SUCCESS &&
           Dir::workspace(H, D, algo, &ws) == CUDNN_STATUS_SUCCESS;
    if (!have) PF_DNN_CHECK(cudnnSetConvolutionMathType(D.conv.d, requested_math(p.dtype)));
  }
  if (!have) {
    const bool exhaustive = cache.exhaustive_search();
    Perf perf[Dir::kAlgoCount];
    int n = 0;
    const Perf* best = nullptr;
    if (exhaustive) {
      size_t find_ws = 0;
      for (int a = 0; a < Dir::kAlgoCount; ++a) {
        size_t s = 0;
        if (Dir::workspace(H, D, static_cast<Algo>(a), &s) == CUDNN_STATUS_SUCCESS) {
          find_ws = std::max(find_ws, s);
        }
      }
      auto buf = search_workspace(ctx, find_ws);
      Dir::find(H, D, x, w, y, perf, n, buf, find_ws);
      best = first_usable(perf, n, find_ws);
    } else {
      Dir::get(H, D, perf, n);
      best = first_usable(perf, n, kMaxWorkspace);
    }
    if (!best) throw RuntimeError(errmsg(fn, "cuDNN has no algorithm for this convolution: " + key));
    algo = best->algo;
    math = usable_math(p.dtype, best->mathType);
    PF_DNN_CHECK(cudnnSetConvolutionMathType(D.conv.d, math));
    Dir::workspace_checked(H, D, algo, ws);
    cache.insert(key, {static_cast<uint64_t>(algo), ws, math_to_int(math), exhaustive});
  }
  auto buf = run_workspace(ctx, ws);
  Dir::run(H, D, x, w, y, algo, buf, ws);
}

void conv_forward_chunk(DeviceContext& ctx, const ConvProblem& p, const void* x, const void* w, void* y) {
  conv_chunk<ConvFwd>(ctx, p, x, w, y);
}

void conv_backward_data_chunk(DeviceContext& ctx, const ConvProblem& p, void* x, const void* w, const void* y) {
  conv_chunk<ConvBwdData>(ctx, p, x, w, y);
}

void conv_backward_weights_chunk(DeviceContext& ctx, const ConvProblem& p, const void* x, void* w, const void* y) {
  conv_chunk<ConvBwdWeights>(ctx, p, x, w, y);
}

// dst += src for two dense tensors of `dims`.
void accumulate(DeviceContext& ctx, Dtype dtype, const std::vector<int>& dims, void* dst, const void* src) {
  TensorDesc D;
  PF_DNN_CHECK(D.set(dnn_type(dtype), dims));
  DnnHandle& H = handle_for(ctx);
  std::lock_guard lk(H.mu);
  const float one = 1.0f;
  PF_DNN_CHECK(cudnnAddTensor(H.h, &one, D.d, src, &one, D.d, dst));
}

// Descriptors of a pooling problem; false when cuDNN cannot describe it.
bool set_pool_descs(TensorDesc& xD, TensorDesc& yD, PoolDesc& pD, Dtype dtype, PoolMode mode,
                    const std::vector<int>& xd, const std::vector<int>& yd, const std::vector<int>& k,
                    const std::vector<int>& s, const std::vector<int>& p) {
  const cudnnDataType_t t = dnn_type(dtype);
  if (xD.set(t, xd) != CUDNN_STATUS_SUCCESS || yD.set(t, yd) != CUDNN_STATUS_SUCCESS) return false;
  const cudnnPoolingMode_t m = mode == PoolMode::Max             ? CUDNN_POOLING_MAX
                               : mode == PoolMode::AvgIncludePad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                                 : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  return cudnnSetPoolingNdDescriptor(pD.d, m, CUDNN_PROPAGATE_NAN, static_cast<int>(k.size()), k.data(), p.data(),
                                     s.data()) == CUDNN_STATUS_SUCCESS;
}

bool pool_forward_impl(DeviceContext& ctx, Dtype dtype, PoolMode mode, const std::vector<int>& xd,
                       const void* x, const std::vector<int>& yd, void* y, const std::vector<int>& k,
                       const std::vector<int>& s, const std::vector<int>& p) {
  TensorDesc xD, yD;
  PoolDesc pD;
  if (dtype == Dtype::Float64) return false;  // our kernels (the library's double path is not wired in)
  if (!set_pool_descs(xD, yD, pD, dtype, mode, xd, yd, k, s, p)) return false;
  DnnHandle& H = handle_for(ctx);
  std::lock_guard lk(H.mu);
  const float alpha = 1.0f, beta = 0.0f;
  const cudnnStatus_t st = cudnnPoolingForward(H.h, pD.d, &alpha, xD.d, x, &beta, yD.d, y);
  if (soft_failure(st)) return false;
  PF_DNN_CHECK(st);
  return true;
}

bool pool_backward_impl(DeviceContext& ctx, Dtype dtype, PoolMode mode, const std::vector<int>& xd, const void* x,
                        void* dx, const std::vector<int>& yd, const void* y, const void* dy,
                        const std::vector<int>& k, const std::vector<int>& s, const std::vector<int>& p) {
  TensorDesc xD, yD;
  PoolDesc pD;
  if (dtype == Dtype::Float64) return false;  // our kernels (the library's double path is not wired in)
  if (!set_pool_descs(xD, yD, pD, dtype, mode, xd, yd, k, s, p)) return false;
  DnnHandle& H = handle_for(ctx);
  std::lock_guard lk(H.mu);
  const float alpha = 1.0f, beta = 0.0f;
  const cudnnStatus_t st = cudnnPoolingBackward(H.h, pD.d, &alpha, yD.d, y, yD.d, dy, xD.d, x, &beta, xD.d, dx);
  if (soft_failure(st)) return false;
  PF_DNN_CHECK(st);
  return true;
}

bool batch_norm_inference_impl(DeviceContext& ctx, Dtype dtype, const std::vector<int>& xd, const void* x, void* y,
                               const float* scale, const float* bias, const float* mean, const float* var,
                               double eps) {
  if (eps < CUDNN_BN_MIN_EPSILON || dtype == Dtype::Float64) return false;  // float64: our kernel
  TensorDesc xD, bnD;
  if (xD.set(dnn_type(dtype), xd) != CUDNN_STATUS_SUCCESS) return false;
  if (cudnnDeriveBNTensorDescriptor(bnD.d, xD.d, CUDNN_BATCHNORM_SPATIAL) != CUDNN_STATUS_SUCCESS) return false;
  // Our per-channel vectors are float32: use the library only when it reads float32.
  cudnnDataType_t bn_type{};
  int nb = 0, dims[8], strides[8];
  if (cudnnGetTensorNdDescriptor(bnD.d, 8, &bn_type, &nb, dims, strides) != CUDNN_STATUS_SUCCESS ||
      bn_type != CUDNN_DATA_FLOAT) {
    return false;
  }
  DnnHandle& H = handle_for(ctx);
  std::lock_guard lk(H.mu);
  const float alpha = 1.0f, beta = 0.0f;
  const cudnnStatus_t st = cudnnBatchNormalizationForwardInference(
      H.h, CUDNN_BATCHNORM_SPATIAL, &alpha, &beta, xD.d, x, xD.d, y, bnD.d, scale, bias, mean, var, eps);
  if (soft_failure(st)) return false;
  PF_DNN_CHECK(st);
  return true;
}

#endif

}  // namespace

// ================================================================== API

void conv_forward(DeviceContext& ctx, const ConvProblem& p, const void* x, const void* w, void* y) {
  DeviceGuard g(ctx.device);
  const size_t es = itemsize(p.dtype);
  const int64_t xs = shape_size(p.x) / std::max<int64_t>(p.x[0], 1), ys = shape_size(p.y) / std::max<int64_t>(p.y[0], 1);
  for_batch_chunks(p, "conv", [&](int64_t n0, int64_t n) {
    conv_forward_chunk(ctx, with_batch(p, n), static_cast<const char*>(x) + n0 * xs * es, w,
                       static_cast<char*>(y) + n0 * ys * es);
  });
}

void conv_backward_data(DeviceContext& ctx, const ConvProblem& p, void* x, const void* w, const void* y) {
  DeviceGuard g(ctx.device);
  const size_t es = itemsize(p.dtype);
  const int64_t xs = shape_size(p.x) / std::max<int64_t>(p.x[0], 1), ys = shape_size(p.y) / std::max<int64_t>(p.y[0], 1);
  for_batch_chunks(p, "conv_transpose", [&](int64_t n0, int64_t n) {
    conv_backward_data_chunk(ctx, with_batch(p, n), static_cast<char*>(x) + n0 * xs * es, w,
                             static_cast<const char*>(y) + n0 * ys * es);
  });
}

void conv_backward_weights(DeviceContext& ctx, const ConvProblem& p, const void* x, void* w, const void* y) {
  DeviceGuard g(ctx.device);
  const size_t es = itemsize(p.dtype);
  const int64_t xs = shape_size(p.x) / std::max<int64_t>(p.x[0], 1), ys = shape_size(p.y) / std::max<int64_t>(p.y[0], 1);
  std::shared_ptr<Buffer> part;  // later batch chunks' gradients, added into w
  for_batch_chunks(p, "conv_weight_grad", [&](int64_t n0, int64_t n) {
    const void* xc = static_cast<const char*>(x) + n0 * xs * es;
    const void* yc = static_cast<const char*>(y) + n0 * ys * es;
    if (n0 == 0) {
      conv_backward_weights_chunk(ctx, with_batch(p, n), xc, w, yc);
      return;
    }
    if (!part) part = temp_buffer(ctx, shape_size(p.w) * es);
    conv_backward_weights_chunk(ctx, with_batch(p, n), xc, part->ptr, yc);
    accumulate(ctx, p.dtype, ints(p.w, "conv_weight_grad"), w, part->ptr);
  });
}

namespace {
// A pooling problem as the library's int dimensions (1-d as 2-d with a unit
// height); false when the library does not express it exactly.
bool pool_dims(const Shape& x_shape, const Shape& y_shape, const std::vector<int64_t>& kernel,
               const std::vector<int64_t>& stride, const std::vector<int64_t>& padding, std::vector<int>& xd,
               std::vector<int>& yd, std::vector<int>& k, std::vector<int>& s, std::vector<int>& p) {
  const int nsp = static_cast<int>(kernel.size());
  if (nsp < 1 || nsp > 3 || shape_size(x_shape) > INT_MAX || shape_size(y_shape) > INT_MAX) return false;
  for (int d = 0; d < nsp; ++d) {
    // The library's output size is the floor rule's; the op's may differ
    // (ceil_mode), and then the caller's kernel runs.
    const int64_t in = x_shape[2 + d], out = y_shape[2 + d];
    if (in + 2 * padding[d] < kernel[d] || (in + 2 * padding[d] - kernel[d]) / stride[d] + 1 != out) return false;
    if (padding[d] >= kernel[d]) return false;
  }
  for (int64_t v : x_shape) xd.push_back(static_cast<int>(v));
  for (int64_t v : y_shape) yd.push_back(static_cast<int>(v));
  for (int d = 0; d < nsp; ++d) {
    k.push_back(static_cast<int>(kernel[d]));
    s.push_back(static_cast<int>(stride[d]));
    p.push_back(static_cast<int>(padding[d]));
  }
  if (nsp == 1) {  // as 2-d with a unit height
    xd.insert(xd.begin() + 2, 1);
    yd.insert(yd.begin() + 2, 1);
    k.insert(k.begin(), 1);
    s.insert(s.begin(), 1);
    p.insert(p.begin(), 0);
  }
  return true;
}
}  // namespace

bool pool_forward(DeviceContext& ctx, Dtype dtype, PoolMode mode, const Shape& x_shape, const void* x,
                  const Shape& y_shape, void* y, const std::vector<int64_t>& kernel,
                  const std::vector<int64_t>& stride, const std::vector<int64_t>& padding) {
  std::vector<int> xd, yd, k, s, p;
  if (!pool_dims(x_shape, y_shape, kernel, stride, padding, xd, yd, k, s, p)) return false;
  DeviceGuard g(ctx.device);
  return pool_forward_impl(ctx, dtype, mode, xd, x, yd, y, k, s, p);
}

bool pool_backward(DeviceContext& ctx, Dtype dtype, PoolMode mode, const Shape& x_shape, const void* x, void* dx,
                   const Shape& y_shape, const void* y, const void* dy, const std::vector<int64_t>& kernel,
                   const std::vector<int64_t>& stride, const std::vector<int64_t>& padding) {
  if (mode == PoolMode::Max) return false;  // see dnn.h
  std::vector<int> xd, yd, k, s, p;
  if (!pool_dims(x_shape, y_shape, kernel, stride, padding, xd, yd, k, s, p)) return false;
  DeviceGuard g(ctx.device);
  return pool_backward_impl(ctx, dtype, mode, xd, x, dx, yd, y, dy, k, s, p);
}

bool batch_norm_inference(DeviceContext& ctx, Dtype dtype, const Shape& x_shape, const void* x, void* y,
                          const float* scale, const float* bias, const float* mean, const float* var, double eps) {
  // Spatial batch norm only sees channels: (N, C, S, 1) for any rank.
  const int64_t N = x_shape[0], C = x_shape[1], S = shape_size(x_shape) / std::max<int64_t>(N * C, 1);
  if (shape_size(x_shape) > INT_MAX) return false;
  const std::vector<int> xd{static_cast<int>(N), static_cast<int>(C), static_cast<int>(S), 1};
  DeviceGuard g(ctx.device);
  return batch_norm_inference_impl(ctx, dtype, xd, x, y, scale, bias, mean, var, eps);
}

}  // namespace pyflame::backend::rocm::dnn
