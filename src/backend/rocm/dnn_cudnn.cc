// DNN library wrapper, the cuDNN half (NVIDIA; see dnn.h and dnn_vendor.h):
// cuDNN 9's legacy API, and the hand-off of 16-bit channels-last problems
// to its graph API (dnn_cudnn_graph.cc). cuDNN enums are mapped name to
// name, never cast.
#if !defined(__HIP_PLATFORM_AMD__)
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backend/rocm/dnn_vendor.h"
#include "pyflame/backend/rocm.h"
#include "pyflame/backend/tuning.h"
#include "pyflame/errors.h"
#include "runtime/settings.h"

namespace pyflame::backend::rocm::dnn::detail {

const std::string& library_tag() {
  static const std::string tag = "cudnn" + std::to_string(cudnnGetVersion());
  return tag;
}

cudnnDataType_t dnn_type(Dtype t) {
  switch (t) {
    case Dtype::Float16: return CUDNN_DATA_HALF;
    case Dtype::BFloat16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
  }
}

namespace {

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
  cudnnStatus_t set(cudnnDataType_t t, const std::vector<int>& dims) { return set(t, dims, packed_strides(dims)); }
  cudnnStatus_t set(cudnnDataType_t t, const std::vector<int>& dims, const std::vector<int>& st) {
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

// Channels-last: NHWC activations by their strides, the filter in the NHWC
// (KRSC) format (dims stay in the logical K, C, R, S order).
cudnnStatus_t set_conv_descs(ConvDescs& D, const Lifted& L, Dtype dt, int64_t groups) {
  const cudnnDataType_t t = dnn_type(dt);
  const cudnnTensorFormat_t wf = L.channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  cudnnStatus_t st = D.x.set(t, L.x, L.strides(L.x));
  if (st == CUDNN_STATUS_SUCCESS) st = D.y.set(t, L.y, L.strides(L.y));
  if (st == CUDNN_STATUS_SUCCESS) {
    st = cudnnSetFilterNdDescriptor(D.w.d, t, wf, static_cast<int>(L.w.size()), L.w.data());
  }
  if (st == CUDNN_STATUS_SUCCESS) {
    st = cudnnSetConvolutionNdDescriptor(D.conv.d, L.nsp, L.pad.data(), L.stride.data(), L.dil.data(),
                                         CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
  }
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnSetConvolutionGroupCount(D.conv.d, static_cast<int>(groups));
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnSetConvolutionMathType(D.conv.d, requested_math(dt));
  return st;
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

// FindEx times each algorithm once, cold, and may rank one under a math type
// it then does not run with (fp32 without TF32 runs FMA math): its first
// pick flips between processes (an fp32 3x3 convolution, 32x256x14x14, ran
// 143 to 265 us on an H100 by the pick). Its first usable candidates (up to
// kRetimed) are timed again here, warm, with the math type each will run
// with; the fastest is kept. The output operand is written meanwhile, as by
// the search itself.
constexpr int kRetimed = 4;

template <class Dir>
const typename Dir::Perf* retimed(DeviceContext& ctx, DnnHandle& H, ConvDescs& D, Dtype dt,
                                  const typename Dir::Perf* perf, int n, size_t limit, typename Dir::XPtr x,
                                  typename Dir::WPtr w, typename Dir::YPtr y) {
  hipEvent_t ev[2] = {};
  struct Destroy {  // on every way out, a throwing check included
    hipEvent_t* e;
    ~Destroy() {
      for (int i = 0; i < 2; ++i) {
        if (e[i]) (void)hipEventDestroy(e[i]);
      }
    }
  } destroy{ev};
  PF_HIP_CHECK(hipEventCreate(&ev[0]));
  PF_HIP_CHECK(hipEventCreate(&ev[1]));
  const typename Dir::Perf* best = nullptr;
  float best_ms = 0.0f;
  for (int i = 0, tried = 0; i < n && tried < kRetimed; ++i) {
    const auto& c = perf[i];
    if (c.status != CUDNN_STATUS_SUCCESS || c.memory > limit) continue;
    ++tried;
    size_t ws = 0;
    if (cudnnSetConvolutionMathType(D.conv.d, usable_math(dt, c.mathType)) != CUDNN_STATUS_SUCCESS ||
        Dir::workspace(H, D, c.algo, &ws) != CUDNN_STATUS_SUCCESS || ws > limit) {
      continue;
    }
    auto buf = run_workspace(ctx, ws);
    bool ok = Dir::run(H, D, x, w, y, c.algo, buf, ws) == CUDNN_STATUS_SUCCESS;  // warm-up
    PF_HIP_CHECK(hipEventRecord(ev[0], ctx.stream));
    for (int r = 0; ok && r < 3; ++r) ok = Dir::run(H, D, x, w, y, c.algo, buf, ws) == CUDNN_STATUS_SUCCESS;
    PF_HIP_CHECK(hipEventRecord(ev[1], ctx.stream));
    PF_HIP_CHECK(hipEventSynchronize(ev[1]));
    float ms = 0.0f;
    PF_HIP_CHECK(hipEventElapsedTime(&ms, ev[0], ev[1]));
    if (ok && (!best || ms < best_ms)) {
      best = &c;
      best_ms = ms;
    }
  }
  return best ? best : first_usable(perf, n, limit);
}

// Per-direction cuDNN calls for conv_chunk. The output is y for the forward
// pass and x for the backward-data pass (conv_transpose).
struct ConvFwd {
  static constexpr ConvDir dir = ConvDir::Forward;
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
  static cudnnStatus_t find(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, Perf* perf, int& n,
                            const std::shared_ptr<Buffer>& buf, size_t find_ws) {
    return cudnnFindConvolutionForwardAlgorithmEx(H.h, D.x.d, x, D.w.d, w, D.conv.d, D.y.d, y,
                                                  CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf, ptr_of(buf),
                                                  find_ws);
  }
  static cudnnStatus_t get(DnnHandle& H, const ConvDescs& D, Perf* perf, int& n) {
    return cudnnGetConvolutionForwardAlgorithm_v7(H.h, D.x.d, D.w.d, D.conv.d, D.y.d,
                                                  CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf);
  }
  static cudnnStatus_t run(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, Algo algo,
                           const std::shared_ptr<Buffer>& buf, size_t ws) {
    const float alpha = 1.0f, beta = 0.0f;
    return cudnnConvolutionForward(H.h, &alpha, D.x.d, x, D.w.d, w, D.conv.d, algo, ptr_of(buf), ws, &beta,
                                   D.y.d, y);
  }
};

struct ConvBwdData {
  static constexpr ConvDir dir = ConvDir::BackwardData;
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
  static cudnnStatus_t find(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, Perf* perf, int& n,
                            const std::shared_ptr<Buffer>& buf, size_t find_ws) {
    return cudnnFindConvolutionBackwardDataAlgorithmEx(H.h, D.w.d, w, D.y.d, y, D.conv.d, D.x.d, x,
                                                       CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf,
                                                       ptr_of(buf), find_ws);
  }
  static cudnnStatus_t get(DnnHandle& H, const ConvDescs& D, Perf* perf, int& n) {
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(H.h, D.w.d, D.y.d, D.conv.d, D.x.d,
                                                       CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf);
  }
  static cudnnStatus_t run(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, Algo algo,
                           const std::shared_ptr<Buffer>& buf, size_t ws) {
    const float alpha = 1.0f, beta = 0.0f;
    return cudnnConvolutionBackwardData(H.h, &alpha, D.w.d, w, D.y.d, y, D.conv.d, algo, ptr_of(buf), ws,
                                        &beta, D.x.d, x);
  }
};

// The backward-filter pass (the weight gradient): w is the output, x and y
// (the output cotangent) the inputs.
struct ConvBwdWeights {
  static constexpr ConvDir dir = ConvDir::BackwardWeights;
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
  static cudnnStatus_t find(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, Perf* perf, int& n,
                            const std::shared_ptr<Buffer>& buf, size_t find_ws) {
    return cudnnFindConvolutionBackwardFilterAlgorithmEx(H.h, D.x.d, x, D.y.d, y, D.conv.d, D.w.d, w,
                                                         CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf,
                                                         ptr_of(buf), find_ws);
  }
  static cudnnStatus_t get(DnnHandle& H, const ConvDescs& D, Perf* perf, int& n) {
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(H.h, D.x.d, D.y.d, D.conv.d, D.w.d,
                                                         CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf);
  }
  static cudnnStatus_t run(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, Algo algo,
                           const std::shared_ptr<Buffer>& buf, size_t ws) {
    const float alpha = 1.0f, beta = 0.0f;
    return cudnnConvolutionBackwardFilter(H.h, &alpha, D.x.d, x, D.y.d, y, D.conv.d, algo, ptr_of(buf), ws,
                                          &beta, D.w.d, w);
  }
};

// The graph API takes 16-bit problems (the tensor-core kernels the legacy API
// does not pick) unless PYFLAME_CUDNN_GRAPH=0: channels-last ones always,
// row-major ones when asked as given (library_layout_only).
bool graph_takes(Dtype dt) {
  return (dt == Dtype::Float16 || dt == Dtype::BFloat16) && settings::cudnn_graph();
}

// Algorithm selection shared by all directions: the graph API where it
// builds a plan (graph_takes), else tuning-cache hit (algo and math type),
// else exhaustive FindEx or heuristic Get_v7, then cache. A channels-last
// problem cuDNN rejects (bad parameter or not supported, at any step) is
// cached as kRejected and returns false.
template <class Dir>
bool conv_chunk(DeviceContext& ctx, const ConvProblem& p, typename Dir::XPtr x, typename Dir::WPtr w,
                typename Dir::YPtr y) {
  using Algo = typename Dir::Algo;
  using Perf = typename Dir::Perf;
  const char* fn = Dir::fn;
  const Lifted L = lift(p, fn);
  const bool cl = L.channels_last;
  const bool graph = graph_takes(p.dtype) && (cl || p.library_layout_only);
  if (graph && conv_graph_chunk(ctx, Dir::dir, L, p.dtype, p.groups, x, w, y)) return true;
  if (p.library_layout_only) return false;
  MIOpenTuningCache& cache = get_tuning_cache();
  const std::string key = conv_key(Dir::key_prefix, L, p.dtype, p.groups, ctx.device);
  const bool exhaustive = cache.exhaustive_search();
  auto reject = [&] {
    cache.insert(key, {kRejected, 0, 0, exhaustive});
    return false;
  };
  ConvDescs D;
  PF_DNN_TRY(set_conv_descs(D, L, p.dtype, p.groups), cl, reject());
  DnnHandle& H = handle_for(ctx);
  const auto lk = lock_handle(ctx, H);
  Algo algo{};
  cudnnMathType_t math = requested_math(p.dtype);
  size_t ws = 0;
  bool have = false;
  if (auto e = cache.lookup(key)) {
    if (e->algo == kRejected) return false;
    algo = static_cast<Algo>(e->algo);
    math = math_from_int(e->math);
    have = cudnnSetConvolutionMathType(D.conv.d, math) == CUDNN_STATUS_SUCCESS &&
           Dir::workspace(H, D, algo, &ws) == CUDNN_STATUS_SUCCESS;
    if (!have) PF_DNN_TRY(cudnnSetConvolutionMathType(D.conv.d, requested_math(p.dtype)), cl, reject());
  }
  if (!have) {
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
      PF_DNN_TRY(Dir::find(H, D, x, w, y, perf, n, buf, find_ws), cl, reject());
      buf.reset();  // the candidates' own workspaces next
      best = retimed<Dir>(ctx, H, D, p.dtype, perf, n, find_ws, x, w, y);
    } else {
      PF_DNN_TRY(Dir::get(H, D, perf, n), cl, reject());
      best = first_usable(perf, n, kMaxWorkspace);
    }
    if (!best) {
      if (cl) return reject();
      throw RuntimeError(errmsg(fn, "cuDNN has no algorithm for this convolution: " + key));
    }
    algo = best->algo;
    math = usable_math(p.dtype, best->mathType);
    PF_DNN_TRY(cudnnSetConvolutionMathType(D.conv.d, math), cl, reject());
    PF_DNN_TRY(Dir::workspace(H, D, algo, &ws), cl, reject());
    cache.insert(key, {static_cast<uint64_t>(algo), ws, math_to_int(math), exhaustive});
  }
  auto buf = run_workspace(ctx, ws);
  PF_DNN_TRY(Dir::run(H, D, x, w, y, algo, buf, ws), cl, reject());
  return true;
}

}  // namespace

bool conv_forward_chunk(DeviceContext& ctx, const ConvProblem& p, const void* x, const void* w, void* y) {
  return conv_chunk<ConvFwd>(ctx, p, x, w, y);
}

bool conv_backward_data_chunk(DeviceContext& ctx, const ConvProblem& p, void* x, const void* w, const void* y) {
  return conv_chunk<ConvBwdData>(ctx, p, x, w, y);
}

bool conv_backward_weights_chunk(DeviceContext& ctx, const ConvProblem& p, const void* x, void* w, const void* y) {
  return conv_chunk<ConvBwdWeights>(ctx, p, x, w, y);
}

// dst += src for two dense tensors of `dims`.
void accumulate(DeviceContext& ctx, Dtype dtype, const std::vector<int>& dims, void* dst, const void* src) {
  TensorDesc D;
  PF_DNN_CHECK(D.set(dnn_type(dtype), dims));
  DnnHandle& H = handle_for(ctx);
  const auto lk = lock_handle(ctx, H);
  const float one = 1.0f;
  PF_DNN_CHECK(cudnnAddTensor(H.h, &one, D.d, src, &one, D.d, dst));
}

namespace {

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

}  // namespace

bool pool_forward_impl(DeviceContext& ctx, Dtype dtype, PoolMode mode, const std::vector<int>& xd,
                       const void* x, const std::vector<int>& yd, void* y, const std::vector<int>& k,
                       const std::vector<int>& s, const std::vector<int>& p) {
  TensorDesc xD, yD;
  PoolDesc pD;
  if (dtype == Dtype::Float64) return false;  // our kernels (the library's double path is not wired in)
  if (!set_pool_descs(xD, yD, pD, dtype, mode, xd, yd, k, s, p)) return false;
  DnnHandle& H = handle_for(ctx);
  const auto lk = lock_handle(ctx, H);
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
  const auto lk = lock_handle(ctx, H);
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
  const auto lk = lock_handle(ctx, H);
  const float alpha = 1.0f, beta = 0.0f;
  const cudnnStatus_t st = cudnnBatchNormalizationForwardInference(
      H.h, CUDNN_BATCHNORM_SPATIAL, &alpha, &beta, xD.d, x, xD.d, y, bnD.d, scale, bias, mean, var, eps);
  if (soft_failure(st)) return false;
  PF_DNN_CHECK(st);
  return true;
}


}  // namespace pyflame::backend::rocm::dnn::detail

#endif  // !__HIP_PLATFORM_AMD__
