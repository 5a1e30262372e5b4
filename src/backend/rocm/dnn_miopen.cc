// DNN library wrapper, the MIOpen half (AMD; see dnn.h and dnn_vendor.h).
// MIOpen enums are mapped name to name, never cast.
#if defined(__HIP_PLATFORM_AMD__)
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backend/rocm/dnn_vendor.h"
#include "pyflame/backend/rocm.h"
#include "pyflame/backend/tuning.h"
#include "pyflame/errors.h"

namespace pyflame::backend::rocm::dnn::detail {

const std::string& library_tag() {
  static const std::string tag = [] {
    size_t ma = 0, mi = 0, pa = 0;
    PF_DNN_CHECK(miopenGetVersion(&ma, &mi, &pa));
    return "miopen" + std::to_string(ma) + "." + std::to_string(mi) + "." + std::to_string(pa);
  }();
  return tag;
}

namespace {


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
  miopenStatus_t set(miopenDataType_t t, const std::vector<int>& dims) { return set(t, dims, packed_strides(dims)); }
  miopenStatus_t set(miopenDataType_t t, const std::vector<int>& dims, const std::vector<int>& st) {
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

// Channels-last: every operand by its strides (NHWC activations, a KRSC
// filter; dims in the logical order), from which MIOpen takes the layout
// and its NHWC solvers.
miopenStatus_t set_conv_descs(ConvDescs& D, const Lifted& L, Dtype dt, int64_t groups) {
  const miopenDataType_t t = dnn_type(dt);
  miopenStatus_t st = D.x.set(t, L.x, L.strides(L.x));
  if (st == miopenStatusSuccess) st = D.w.set(t, L.w, L.strides(L.w));
  if (st == miopenStatusSuccess) st = D.y.set(t, L.y, L.strides(L.y));
  if (st == miopenStatusSuccess) {
    st = miopenInitConvolutionNdDescriptor(D.conv.d, L.nsp, L.pad.data(), L.stride.data(), L.dil.data(),
                                           miopenConvolution);
  }
  if (st == miopenStatusSuccess) st = miopenSetConvolutionGroupCount(D.conv.d, static_cast<int>(groups));
  return st;
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
  static miopenStatus_t find_workspace(DnnHandle& H, const ConvDescs& D, size_t& find_ws) {
    return miopenConvolutionForwardGetWorkSpaceSize(H.h, D.w.d, D.x.d, D.conv.d, D.y.d, &find_ws);
  }
  static miopenStatus_t find(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, miopenConvAlgoPerf_t* perf,
                             int& n, const std::shared_ptr<Buffer>& buf, size_t find_ws) {
    return miopenFindConvolutionForwardAlgorithm(H.h, D.x.d, x, D.w.d, w, D.conv.d, D.y.d, y, 8, &n, perf,
                                                 ptr_of(buf), find_ws, true);
  }
  static miopenStatus_t solution_count(DnnHandle& H, const ConvDescs& D, size_t& count) {
    return miopenConvolutionForwardGetSolutionCount(H.h, D.w.d, D.x.d, D.conv.d, D.y.d, &count);
  }
  static miopenStatus_t solutions(DnnHandle& H, const ConvDescs& D, std::vector<miopenConvSolution_t>& sols,
                                  size_t& count) {
    return miopenConvolutionForwardGetSolution(H.h, D.w.d, D.x.d, D.conv.d, D.y.d, sols.size(), &count,
                                               sols.data());
  }
  static miopenStatus_t compile(DnnHandle& H, const ConvDescs& D, uint64_t solution) {
    return miopenConvolutionForwardCompileSolution(H.h, D.w.d, D.x.d, D.conv.d, D.y.d, solution);
  }
  static miopenStatus_t run(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y,
                            const std::shared_ptr<Buffer>& buf, size_t ws, uint64_t solution) {
    return miopenConvolutionForwardImmediate(H.h, D.w.d, w, D.x.d, x, D.conv.d, D.y.d, y, ptr_of(buf), ws,
                                             solution);
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
  static miopenStatus_t find_workspace(DnnHandle& H, const ConvDescs& D, size_t& find_ws) {
    return miopenConvolutionBackwardDataGetWorkSpaceSize(H.h, D.y.d, D.w.d, D.conv.d, D.x.d, &find_ws);
  }
  static miopenStatus_t find(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, miopenConvAlgoPerf_t* perf,
                             int& n, const std::shared_ptr<Buffer>& buf, size_t find_ws) {
    return miopenFindConvolutionBackwardDataAlgorithm(H.h, D.y.d, y, D.w.d, w, D.conv.d, D.x.d, x, 8, &n,
                                                      perf, ptr_of(buf), find_ws, true);
  }
  static miopenStatus_t solution_count(DnnHandle& H, const ConvDescs& D, size_t& count) {
    return miopenConvolutionBackwardDataGetSolutionCount(H.h, D.y.d, D.w.d, D.conv.d, D.x.d, &count);
  }
  static miopenStatus_t solutions(DnnHandle& H, const ConvDescs& D, std::vector<miopenConvSolution_t>& sols,
                                  size_t& count) {
    return miopenConvolutionBackwardDataGetSolution(H.h, D.y.d, D.w.d, D.conv.d, D.x.d, sols.size(), &count,
                                                    sols.data());
  }
  static miopenStatus_t compile(DnnHandle& H, const ConvDescs& D, uint64_t solution) {
    return miopenConvolutionBackwardDataCompileSolution(H.h, D.y.d, D.w.d, D.conv.d, D.x.d, solution);
  }
  static miopenStatus_t run(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y,
                            const std::shared_ptr<Buffer>& buf, size_t ws, uint64_t solution) {
    return miopenConvolutionBackwardDataImmediate(H.h, D.y.d, y, D.w.d, w, D.conv.d, D.x.d, x, ptr_of(buf), ws,
                                                  solution);
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
  static miopenStatus_t find_workspace(DnnHandle& H, const ConvDescs& D, size_t& find_ws) {
    return miopenConvolutionBackwardWeightsGetWorkSpaceSize(H.h, D.y.d, D.x.d, D.conv.d, D.w.d, &find_ws);
  }
  static miopenStatus_t find(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y, miopenConvAlgoPerf_t* perf,
                             int& n, const std::shared_ptr<Buffer>& buf, size_t find_ws) {
    return miopenFindConvolutionBackwardWeightsAlgorithm(H.h, D.y.d, y, D.x.d, x, D.conv.d, D.w.d, w, 8, &n,
                                                         perf, ptr_of(buf), find_ws, true);
  }
  static miopenStatus_t solution_count(DnnHandle& H, const ConvDescs& D, size_t& count) {
    return miopenConvolutionBackwardWeightsGetSolutionCount(H.h, D.y.d, D.x.d, D.conv.d, D.w.d, &count);
  }
  static miopenStatus_t solutions(DnnHandle& H, const ConvDescs& D, std::vector<miopenConvSolution_t>& sols,
                                  size_t& count) {
    return miopenConvolutionBackwardWeightsGetSolution(H.h, D.y.d, D.x.d, D.conv.d, D.w.d, sols.size(), &count,
                                                       sols.data());
  }
  static miopenStatus_t compile(DnnHandle& H, const ConvDescs& D, uint64_t solution) {
    return miopenConvolutionBackwardWeightsCompileSolution(H.h, D.y.d, D.x.d, D.conv.d, D.w.d, solution);
  }
  static miopenStatus_t run(DnnHandle& H, const ConvDescs& D, XPtr x, WPtr w, YPtr y,
                            const std::shared_ptr<Buffer>& buf, size_t ws, uint64_t solution) {
    return miopenConvolutionBackwardWeightsImmediate(H.h, D.y.d, y, D.x.d, x, D.conv.d, D.w.d, w, ptr_of(buf),
                                                     ws, solution);
  }
};

// Solution selection shared by all directions: tuning-cache hit, else
// (optionally) Find to fill MIOpen's find-db, then GetSolution, compile,
// cache. A channels-last problem MIOpen rejects (bad parameter, not
// implemented, unsupported, or no solution) is cached as kRejected and
// returns false.
template <class Dir>
bool conv_chunk(DeviceContext& ctx, const ConvProblem& p, typename Dir::XPtr x, typename Dir::WPtr w,
                typename Dir::YPtr y) {
  const char* fn = Dir::fn;
  if (p.library_layout_only) return false;  // no such path: the caller converts the layout
  const Lifted L = lift(p, fn);
  const bool cl = L.channels_last;
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
  uint64_t solution = 0;
  size_t ws = 0;
  bool have = false;
  if (auto e = cache.lookup(key)) {
    if (e->algo == kRejected) return false;
    solution = e->algo;
    have = Dir::solution_workspace(H, D, solution, &ws) == miopenStatusSuccess;
  }
  if (!have) {
    size_t count = 0;
    if (cl) {  // Find throws an unknown error when no solver applies: ask first
      PF_DNN_TRY(Dir::solution_count(H, D, count), cl, reject());
      if (count == 0) return reject();
    }
    if (exhaustive) {
      // Find times the candidates and records them in MIOpen's find-db,
      // which GetSolution then ranks by.
      size_t find_ws = 0;
      PF_DNN_TRY(Dir::find_workspace(H, D, find_ws), cl, reject());
      auto buf = search_workspace(ctx, find_ws);
      miopenConvAlgoPerf_t perf[8];
      int n = 0;
      PF_DNN_TRY(Dir::find(H, D, x, w, y, perf, n, buf, find_ws), cl, reject());
    }
    PF_DNN_TRY(Dir::solution_count(H, D, count), cl, reject());
    std::vector<miopenConvSolution_t> sols(std::max<size_t>(count, 1));
    PF_DNN_TRY(Dir::solutions(H, D, sols, count), cl, reject());
    size_t pick = count;
    for (size_t i = 0; i < count && pick == count; ++i) {
      if (sols[i].workspace_size <= kMaxWorkspace) pick = i;
    }
    if (pick == count) {
      if (cl) return reject();
      throw RuntimeError(errmsg(fn, "MIOpen has no solution for this convolution: " + key));
    }
    solution = sols[pick].solution_id;
    ws = sols[pick].workspace_size;
    PF_DNN_TRY(Dir::compile(H, D, solution), cl, reject());
    cache.insert(key, {solution, ws, 0, exhaustive});
  }
  auto buf = run_workspace(ctx, ws);
  PF_DNN_TRY(Dir::run(H, D, x, w, y, buf, ws, solution), cl, reject());
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

// dst += src for two dense tensors of `dims`: C = 1 * A + 0 * B + 1 * C with
// A = B = src, so that no input aliases the output.
void accumulate(DeviceContext& ctx, Dtype dtype, const std::vector<int>& dims, void* dst, const void* src) {
  TensorDesc D;
  PF_DNN_CHECK(D.set(dnn_type(dtype), dims));
  DnnHandle& H = handle_for(ctx);
  const auto lk = lock_handle(ctx, H);
  const float one = 1.0f, zero = 0.0f;
  PF_DNN_CHECK(miopenOpTensor(H.h, miopenTensorOpAdd, &one, D.d, src, &zero, D.d, src, &one, D.d, dst));
}

namespace {

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
  const auto lk = lock_handle(ctx, H);
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
  const auto lk = lock_handle(ctx, H);
  float alpha = 1.0f, beta = 0.0f;
  const miopenStatus_t st = miopenBatchNormalizationForwardInference(
      H.h, miopenBNSpatial, &alpha, &beta, xD.d, x, xD.d, y, bnD.d, const_cast<float*>(scale),
      const_cast<float*>(bias), const_cast<float*>(mean), const_cast<float*>(var), eps);
  if (soft_failure(st)) return false;
  PF_DNN_CHECK(st);
  return true;
}


}  // namespace pyflame::backend::rocm::dnn::detail

#endif  // __HIP_PLATFORM_AMD__
