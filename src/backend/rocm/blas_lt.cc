// GEMMs through the Lt libraries, hipBLASLt on AMD and cuBLASLt on NVIDIA
// (one API under two prefixes), with each problem's algorithm chosen once.
//
// A classic BLAS GEMM call builds its descriptors and asks the heuristic
// again on every call: about 8 µs of host time per GEMM beside the launch,
// which is most of a small network's eager step. Here a context keeps, per
// problem (types, transposes, sizes, leading dimensions, strides, batch,
// pointer alignments, epilogue), the descriptors and the algorithm picked
// the first time, so a later call is one matmul call. The choice is the
// heuristic's first (for a tiny problem on NVIDIA, its first that is one
// kernel: make_plan), fixed per problem, so repeated calls are
// bit-identical. A problem the library has no algorithm for (float64 on
// AMD, an architecture hipBLASLt has no kernels for) runs the classic call.
//
// Epilogues (bias, relu) reuse the algorithm of the same problem without
// one: the product is then accumulated exactly as the plain GEMM's, so the
// fused result equals the plain GEMM followed by separate kernels bit for
// bit (docs/design/fusion.md, "GEMM epilogues").
//
// The plans belong to one DeviceContext and are used under its BLAS handle's
// rule (one thread at a time: blas.cc, lock_handle), so they need no lock.
#include <algorithm>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "backend/rocm/blas.h"
#include "pyflame/errors.h"

#if defined(__HIP_PLATFORM_AMD__)
#include <hipblaslt/hipblaslt.h>
#else
#include <cublasLt.h>
// hipBLASLt's names for cuBLASLt's, only those used here.
using hipblasStatus_t = cublasStatus_t;
using hipblasLtHandle_t = cublasLtHandle_t;
using hipblasLtMatmulDesc_t = cublasLtMatmulDesc_t;
using hipblasLtMatrixLayout_t = cublasLtMatrixLayout_t;
using hipblasLtMatmulPreference_t = cublasLtMatmulPreference_t;
using hipblasLtMatmulAlgo_t = cublasLtMatmulAlgo_t;
using hipblasLtMatmulHeuristicResult_t = cublasLtMatmulHeuristicResult_t;
using hipblasLtMatmulDescAttributes_t = cublasLtMatmulDescAttributes_t;
using hipblasLtEpilogue_t = cublasLtEpilogue_t;
using hipblasComputeType_t = cublasComputeType_t;
using hipblasOperation_t = cublasOperation_t;
using hipDataType = cudaDataType_t;
#define HIPBLAS_STATUS_SUCCESS CUBLAS_STATUS_SUCCESS
#define HIPBLAS_OP_N CUBLAS_OP_N
#define HIPBLAS_OP_T CUBLAS_OP_T
#define HIPBLAS_COMPUTE_32F CUBLAS_COMPUTE_32F
#define HIPBLAS_COMPUTE_32F_FAST_TF32 CUBLAS_COMPUTE_32F_FAST_TF32
#define HIPBLAS_COMPUTE_64F CUBLAS_COMPUTE_64F
#define HIP_R_16F CUDA_R_16F
#define HIP_R_16BF CUDA_R_16BF
#define HIP_R_32F CUDA_R_32F
#define HIP_R_64F CUDA_R_64F
#define HIPBLASLT_MATMUL_DESC_TRANSA CUBLASLT_MATMUL_DESC_TRANSA
#define HIPBLASLT_MATMUL_DESC_TRANSB CUBLASLT_MATMUL_DESC_TRANSB
#define HIPBLASLT_MATMUL_DESC_EPILOGUE CUBLASLT_MATMUL_DESC_EPILOGUE
#define HIPBLASLT_MATMUL_DESC_BIAS_POINTER CUBLASLT_MATMUL_DESC_BIAS_POINTER
#define HIPBLASLT_MATMUL_DESC_BIAS_DATA_TYPE CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE
#define HIPBLASLT_EPILOGUE_DEFAULT CUBLASLT_EPILOGUE_DEFAULT
#define HIPBLASLT_EPILOGUE_RELU CUBLASLT_EPILOGUE_RELU
#define HIPBLASLT_EPILOGUE_BIAS CUBLASLT_EPILOGUE_BIAS
#define HIPBLASLT_EPILOGUE_RELU_BIAS CUBLASLT_EPILOGUE_RELU_BIAS
#define HIPBLASLT_MATRIX_LAYOUT_BATCH_COUNT CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT
#define HIPBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET
#define HIPBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
#define hipblasLtCreate cublasLtCreate
#define hipblasLtDestroy cublasLtDestroy
#define hipblasLtMatmulDescCreate cublasLtMatmulDescCreate
#define hipblasLtMatmulDescDestroy cublasLtMatmulDescDestroy
#define hipblasLtMatmulDescSetAttribute cublasLtMatmulDescSetAttribute
#define hipblasLtMatrixLayoutCreate cublasLtMatrixLayoutCreate
#define hipblasLtMatrixLayoutDestroy cublasLtMatrixLayoutDestroy
#define hipblasLtMatrixLayoutSetAttribute cublasLtMatrixLayoutSetAttribute
#define hipblasLtMatmulPreferenceCreate cublasLtMatmulPreferenceCreate
#define hipblasLtMatmulPreferenceDestroy cublasLtMatmulPreferenceDestroy
#define hipblasLtMatmulPreferenceSetAttribute cublasLtMatmulPreferenceSetAttribute
#define hipblasLtMatmulAlgoGetHeuristic cublasLtMatmulAlgoGetHeuristic
#define hipblasLtMatmul cublasLtMatmul
#endif

namespace pyflame::backend::rocm {

namespace {

// A failed Lt call while planning: the problem then runs the classic call.
struct NoPlan {};
void lt_check(hipblasStatus_t st) {
  if (st != HIPBLAS_STATUS_SUCCESS) throw NoPlan{};
}

// A failed Lt call while running a plan the library accepted: an error.
void lt_run_check(hipblasStatus_t st, const char* what) {
  if (st != HIPBLAS_STATUS_SUCCESS) {
    throw RuntimeError(errmsg("gemm", std::string(what) + " failed (status " + std::to_string(int(st)) + ")"));
  }
}

}  // namespace

struct GemmKey {
  int64_t v[16];
  bool operator==(const GemmKey& o) const { return std::memcmp(v, o.v, sizeof(v)) == 0; }
};
struct GemmKeyHash {
  size_t operator()(const GemmKey& k) const {
    return std::hash<std::string_view>{}(std::string_view(reinterpret_cast<const char*>(k.v), sizeof(k.v)));
  }
};

struct GemmPlan {
  hipblasLtMatmulDesc_t op = nullptr;
  hipblasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  hipblasLtMatmulAlgo_t algo{};
  bool found = false;  // false: no algorithm (for an epilogue: none that matches the plain one)
  GemmPlan() = default;
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;
  ~GemmPlan() {
    if (op) hipblasLtMatmulDescDestroy(op);
    for (auto l : {a, b, c}) {
      if (l) hipblasLtMatrixLayoutDestroy(l);
    }
  }
};

struct GemmPlans {
  hipblasLtHandle_t lt = nullptr;
  bool unavailable = false;  // the library could not start: every GEMM takes the classic call
  std::unordered_map<GemmKey, GemmPlan, GemmKeyHash> plans;
  ~GemmPlans() {
    plans.clear();
    if (lt) hipblasLtDestroy(lt);
  }
};

namespace {

// A problem with varying sizes (prefill lengths, say) must not grow this without bound.
constexpr size_t kMaxPlans = 1024;

// Heuristic candidates looked at: the first choice, or on NVIDIA for a tiny
// problem (whose kernel runs for about as long as a launch takes on the
// host, so a split-K algorithm's second kernel, the reduction, costs more
// than the split saves) the best one that is one kernel. On AMD an
// epilogue's list is searched for the plain problem's algorithm.
constexpr int kCandidates = 8;
#if defined(__HIP_PLATFORM_AMD__)
constexpr int kEpilogueCandidates = 32;
#endif

hipDataType type_of(Dtype d) {
  switch (d) {
    case Dtype::Float16: return HIP_R_16F;
    case Dtype::BFloat16: return HIP_R_16BF;
    case Dtype::Float64: return HIP_R_64F;
    default: return HIP_R_32F;
  }
}
hipblasOperation_t op(Trans t) { return t == Trans::N ? HIPBLAS_OP_N : HIPBLAS_OP_T; }

int alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (int bytes : {16, 8, 4, 2}) {
    if (a % uintptr_t(bytes) == 0) return bytes;
  }
  return 1;
}

enum Epi : int64_t { kPlain = 0, kRelu = 1, kBias = 2, kBiasRelu = 3 };
Epi epi_of(const GemmEpilogue& e) { return Epi((e.bias ? kBias : kPlain) | (e.relu ? kRelu : kPlain)); }
hipblasLtEpilogue_t lt_epilogue(Epi e) {
  switch (e) {
    case kRelu: return HIPBLASLT_EPILOGUE_RELU;
    case kBias: return HIPBLASLT_EPILOGUE_BIAS;
    case kBiasRelu: return HIPBLASLT_EPILOGUE_RELU_BIAS;
    default: return HIPBLASLT_EPILOGUE_DEFAULT;
  }
}

template <typename T>
void set_attr(hipblasLtMatmulDesc_t d, hipblasLtMatmulDescAttributes_t k, const T& v) {
  lt_check(hipblasLtMatmulDescSetAttribute(d, k, &v, sizeof(v)));
}

// A column-major rows x cols matrix, `batch` of them `stride` elements apart.
hipblasLtMatrixLayout_t layout(hipDataType t, int rows, int cols, int ld, int64_t stride, int batch) {
  hipblasLtMatrixLayout_t l = nullptr;
  lt_check(hipblasLtMatrixLayoutCreate(&l, t, uint64_t(rows), uint64_t(cols), int64_t(ld)));
  if (batch > 1) {
    const int32_t n = batch;
    hipblasStatus_t st = hipblasLtMatrixLayoutSetAttribute(l, HIPBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof(n));
    if (st == HIPBLAS_STATUS_SUCCESS) {
      st = hipblasLtMatrixLayoutSetAttribute(l, HIPBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                             sizeof(stride));
    }
    if (st != HIPBLAS_STATUS_SUCCESS) hipblasLtMatrixLayoutDestroy(l);
    lt_check(st);
  }
  return l;
}

#if !defined(__HIP_PLATFORM_AMD__)
constexpr int64_t kTinyGemm = int64_t(1) << 23;  // multiply-adds

uint32_t split_k(const cublasLtMatmulAlgo_t& algo) {
  uint32_t v = 1;
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &v, sizeof(v), &written) !=
      CUBLAS_STATUS_SUCCESS) {
    return 1;
  }
  return v;
}
#endif

hipblasLtMatmulPreference_t preference(size_t workspace, const int align[3]) {
  hipblasLtMatmulPreference_t pref = nullptr;
  lt_check(hipblasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace;
  hipblasStatus_t st =
      hipblasLtMatmulPreferenceSetAttribute(pref, HIPBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
#if !defined(__HIP_PLATFORM_AMD__)
  // D is C (the product is written in place). hipBLASLt has no such preferences.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, int> aligns[4] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align[0]},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align[1]},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align[2]},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align[2]}};
  for (const auto& [attr, bytes] : aligns) {
    const uint32_t v = uint32_t(bytes);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v));
  }
#else
  (void)align;
#endif
  if (st != HIPBLAS_STATUS_SUCCESS) hipblasLtMatmulPreferenceDestroy(pref);
  lt_check(st);
  return pref;
}

// The descriptors of `g`'s problem with epilogue `e` (its bias pointer set per call).
void describe(GemmPlan& p, const LtGemm& g, Epi e) {
  const bool f64 = g.dtype == Dtype::Float64;
  const hipblasComputeType_t compute = f64 ? HIPBLAS_COMPUTE_64F
                                       : g.tf32 ? HIPBLAS_COMPUTE_32F_FAST_TF32
                                                : HIPBLAS_COMPUTE_32F;
  const hipDataType t = type_of(g.dtype);
  lt_check(hipblasLtMatmulDescCreate(&p.op, compute, f64 ? HIP_R_64F : HIP_R_32F));
  set_attr(p.op, HIPBLASLT_MATMUL_DESC_TRANSA, op(g.ta));
  set_attr(p.op, HIPBLASLT_MATMUL_DESC_TRANSB, op(g.tb));
  if (e != kPlain) {
    set_attr(p.op, HIPBLASLT_MATMUL_DESC_EPILOGUE, lt_epilogue(e));
    if (e & kBias) set_attr(p.op, HIPBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, t);
  }
  const bool na = g.ta == Trans::N, nb = g.tb == Trans::N;
  p.a = layout(t, na ? g.M : g.K, na ? g.K : g.M, g.lda, g.sa, g.batch);
  p.b = layout(t, nb ? g.K : g.N, nb ? g.N : g.K, g.ldb, g.sb, g.batch);
  p.c = layout(t, g.M, g.N, g.ldc, g.sc, g.batch);
}

// Up to n of the heuristic's candidates for p's problem, into r; how many.
// A problem the library has no algorithm for answers NOT_SUPPORTED: none.
int candidates(hipblasLtHandle_t lt, const GemmPlan& p, const int align[3], size_t workspace,
               hipblasLtMatmulHeuristicResult_t* r, int n) {
  hipblasLtMatmulPreference_t pref = preference(workspace, align);
  int found = 0;
  const hipblasStatus_t st = hipblasLtMatmulAlgoGetHeuristic(lt, p.op, p.a, p.b, p.c, p.c, pref, n, r, &found);
  hipblasLtMatmulPreferenceDestroy(pref);
  return st == HIPBLAS_STATUS_SUCCESS ? found : 0;
}

// The plain problem's plan: the heuristic's choice (see kCandidates).
void make_plan(GemmPlan& p, hipblasLtHandle_t lt, const LtGemm& g, const int align[3], size_t workspace) {
  describe(p, g, kPlain);
  hipblasLtMatmulHeuristicResult_t r[kCandidates] = {};
  const int found = candidates(lt, p, align, workspace, r, kCandidates);
  int pick = -1;
  for (int i = 0; i < found && pick < 0; ++i) {
    if (r[i].state == HIPBLAS_STATUS_SUCCESS) pick = i;
  }
#if !defined(__HIP_PLATFORM_AMD__)
  const bool tiny = int64_t(g.M) * g.N * g.K * std::max(g.batch, 1) <= kTinyGemm;
  for (int i = pick; tiny && i >= 0 && i < found; ++i) {
    if (r[i].state == CUBLAS_STATUS_SUCCESS && split_k(r[i].algo) == 1) {
      pick = i;
      break;
    }
  }
#endif
  if (pick >= 0) {
    p.algo = r[pick].algo;
    p.found = true;
  }
}

// An epilogue's plan: the plain problem's algorithm, if the library takes it
// with the epilogue: cuBLASLt answers that directly (AlgoCheck); hipBLASLt's
// C API has no such call, so there it must be among the heuristic's
// candidates for the problem with the epilogue.
void make_epilogue_plan(GemmPlan& p, hipblasLtHandle_t lt, const LtGemm& g, Epi e,
                        const hipblasLtMatmulAlgo_t& plain, const int align[3], size_t workspace) {
  describe(p, g, e);
#if !defined(__HIP_PLATFORM_AMD__)
  (void)align;
  cublasLtMatmulHeuristicResult_t check{};
  if (cublasLtMatmulAlgoCheck(lt, p.op, p.a, p.b, p.c, p.c, &plain, &check) == CUBLAS_STATUS_SUCCESS &&
      check.workspaceSize <= workspace) {
    p.algo = plain;
    p.found = true;
  }
#else
  hipblasLtMatmulHeuristicResult_t r[kEpilogueCandidates] = {};
  const int found = candidates(lt, p, align, workspace, r, kEpilogueCandidates);
  for (int i = 0; i < found; ++i) {
    // One algorithm: the solution index, the first 4 bytes (the library may
    // also mark a candidate it returns as a fallback).
    if (r[i].state == HIPBLAS_STATUS_SUCCESS && std::memcmp(r[i].algo.data, plain.data, sizeof(int32_t)) == 0) {
      p.algo = r[i].algo;
      p.found = true;
      return;
    }
  }
#endif
}

GemmKey key_of(const LtGemm& g, Epi e, const int align[3], int bias_align) {
  const int64_t kinds = (int64_t(g.dtype) << 32) | (int64_t(g.tf32) << 12) | (int64_t(g.ta) << 4) | int64_t(g.tb);
  return GemmKey{{kinds, g.M, g.N, g.K, g.lda, g.ldb, g.ldc, g.sa, g.sb, g.sc, g.batch, align[0], align[1],
                  align[2], e, bias_align}};
}

// The plan of `key`, made on first use by `make` (a failed library call
// while making it leaves a plan without an algorithm).
template <class Make>
const GemmPlan& find_plan(GemmPlans& s, const GemmKey& key, Make&& make) {
  auto it = s.plans.find(key);
  if (it != s.plans.end()) return it->second;
  if (s.plans.size() >= kMaxPlans) s.plans.clear();
  it = s.plans.try_emplace(key).first;
  try {
    make(it->second);
  } catch (const NoPlan&) {
    it->second.found = false;
  } catch (...) {
    s.plans.erase(it);
    throw;
  }
  return it->second;
}

}  // namespace

bool lt_gemm(DeviceContext& ctx, const LtGemm& g) {
  if (!ctx.gemm_plans) ctx.gemm_plans = new GemmPlans;
  GemmPlans& s = *ctx.gemm_plans;
  if (s.unavailable) return false;
  if (!s.lt && hipblasLtCreate(&s.lt) != HIPBLAS_STATUS_SUCCESS) {
    s.lt = nullptr;
    s.unavailable = true;
    return false;
  }
  const int align[3] = {alignment(g.A), alignment(g.B), alignment(g.C)};
  const Epi e = epi_of(g.epilogue);
  const GemmKey key = key_of(g, e, align, g.epilogue.bias ? alignment(g.epilogue.bias) : 0);
  auto it = s.plans.find(key);  // a later call: one lookup
  const GemmPlan* p = it == s.plans.end() ? nullptr : &it->second;
  if (!p) {
    const size_t ws = ctx.blas_workspace_bytes;
    p = &find_plan(s, key_of(g, kPlain, align, 0), [&](GemmPlan& q) { make_plan(q, s.lt, g, align, ws); });
    if (e != kPlain && p->found) {
      const hipblasLtMatmulAlgo_t algo = p->algo;  // kept: making a plan may clear the map
      p = &find_plan(s, key, [&](GemmPlan& q) { make_epilogue_plan(q, s.lt, g, e, algo, align, ws); });
    }
  }
  if (!p->found) return false;
  if (e & kBias) {
    lt_run_check(hipblasLtMatmulDescSetAttribute(p->op, HIPBLASLT_MATMUL_DESC_BIAS_POINTER, &g.epilogue.bias,
                                                 sizeof(g.epilogue.bias)),
                 "setting the bias");
  }
  lt_run_check(hipblasLtMatmul(s.lt, p->op, g.alpha, g.A, p->a, g.B, p->b, g.beta, g.C, p->c, g.C, p->c, &p->algo,
                               ctx.blas_workspace, ctx.blas_workspace_bytes, ctx.stream),
               "the Lt matmul");
  return true;
}

void release_gemm_plans(DeviceContext& ctx) noexcept {
  delete ctx.gemm_plans;
  ctx.gemm_plans = nullptr;
}

}  // namespace pyflame::backend::rocm
