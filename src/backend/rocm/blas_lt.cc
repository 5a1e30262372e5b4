// NVIDIA GEMMs through cuBLASLt with each problem's algorithm chosen once.
//
// cublasGemmStridedBatchedEx builds its descriptors and asks the heuristic
// again on every call: about 8 µs of host time per GEMM beside the launch,
// which is most of a small network's eager step. Here a context keeps, per
// problem (types, transposes, sizes, leading dimensions, strides, batch,
// pointer alignments), the descriptors and the algorithm the heuristic picked
// the first time, so a later call is one cublasLtMatmul. The choice is the
// heuristic's first choice (for a tiny problem, its first that is one kernel:
// make_plan), fixed per problem, so repeated calls are bit-identical. rocBLAS
// (AMD) keeps its own call.
//
// The plans belong to one DeviceContext and are used under its BLAS handle's
// rule (one thread at a time: blas.cc, lock_handle), so they need no lock.
#if !defined(__HIP_PLATFORM_AMD__)
#include <cublasLt.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "backend/rocm/blas.h"

namespace pyflame::backend::rocm {

struct GemmKey {
  int64_t v[14];
  bool operator==(const GemmKey& o) const { return std::memcmp(v, o.v, sizeof(v)) == 0; }
};
struct GemmKeyHash {
  size_t operator()(const GemmKey& k) const {
    return std::hash<std::string_view>{}(std::string_view(reinterpret_cast<const char*>(k.v), sizeof(k.v)));
  }
};

struct GemmPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;  // false: the heuristic had nothing; the legacy call runs
  GemmPlan() = default;
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;
  ~GemmPlan() {
    if (op) cublasLtMatmulDescDestroy(op);
    for (auto l : {a, b, c}) {
      if (l) cublasLtMatrixLayoutDestroy(l);
    }
  }
};

struct GemmPlans {
  cublasLtHandle_t lt = nullptr;
  std::unordered_map<GemmKey, GemmPlan, GemmKeyHash> plans;
  ~GemmPlans() {
    plans.clear();
    if (lt) cublasLtDestroy(lt);
  }
};

namespace {

// A problem with varying sizes (prefill lengths, say) must not grow this without bound.
constexpr size_t kMaxPlans = 1024;

// The heuristic's first choice, except for a tiny problem: its kernel runs
// for about as long as a launch takes on the host, so a split-K algorithm's
// second kernel (the reduction) costs more than the split saves; then the
// best candidate that is one kernel. Heuristic candidates looked at: 8.
constexpr int kCandidates = 8;
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

int alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (int bytes : {16, 8, 4, 2}) {
    if (a % uintptr_t(bytes) == 0) return bytes;
  }
  return 1;
}

template <typename T>
void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t k, const T& v) {
  PF_BLAS_CHECK(cublasLtMatmulDescSetAttribute(d, k, &v, sizeof(v)));
}

// A column-major rows x cols matrix, `batch` of them `stride` elements apart.
cublasLtMatrixLayout_t layout(cudaDataType_t t, int rows, int cols, int ld, int64_t stride, int batch) {
  cublasLtMatrixLayout_t l = nullptr;
  PF_BLAS_CHECK(cublasLtMatrixLayoutCreate(&l, t, uint64_t(rows), uint64_t(cols), int64_t(ld)));
  if (batch > 1) {
    const int32_t n = batch;
    cublasStatus_t st = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof(n));
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                            sizeof(stride));
    }
    if (st != CUBLAS_STATUS_SUCCESS) cublasLtMatrixLayoutDestroy(l);
    PF_BLAS_CHECK(st);
  }
  return l;
}

void make_plan(GemmPlan& p, cublasLtHandle_t lt, const LtGemm& g, const int align[3], size_t workspace) {
  const cudaDataType_t scale = g.compute == CUBLAS_COMPUTE_64F ? CUDA_R_64F : CUDA_R_32F;
  PF_BLAS_CHECK(cublasLtMatmulDescCreate(&p.op, g.compute, scale));
  set_attr(p.op, CUBLASLT_MATMUL_DESC_TRANSA, g.ta);
  set_attr(p.op, CUBLASLT_MATMUL_DESC_TRANSB, g.tb);
  const bool na = g.ta == CUBLAS_OP_N, nb = g.tb == CUBLAS_OP_N;
  p.a = layout(g.type, na ? g.M : g.K, na ? g.K : g.M, g.lda, g.sa, g.batch);
  p.b = layout(g.type, nb ? g.K : g.N, nb ? g.N : g.K, g.ldb, g.sb, g.batch);
  p.c = layout(g.type, g.M, g.N, g.ldc, g.sc, g.batch);
  cublasLtMatmulPreference_t pref = nullptr;
  PF_BLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  struct Release {
    cublasLtMatmulPreference_t p;
    ~Release() { cublasLtMatmulPreferenceDestroy(p); }
  } release{pref};
  const uint64_t ws = workspace;
  PF_BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  // D is C (the product is written in place).
  const std::pair<cublasLtMatmulPreferenceAttributes_t, int> aligns[4] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align[0]},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align[1]},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align[2]},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align[2]}};
  for (const auto& [attr, bytes] : aligns) {
    const uint32_t v = uint32_t(bytes);
    PF_BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v)));
  }
  cublasLtMatmulHeuristicResult_t r[kCandidates] = {};
  int found = 0;
  // A problem the library has no algorithm for answers NOT_SUPPORTED: the legacy call decides.
  if (cublasLtMatmulAlgoGetHeuristic(lt, p.op, p.a, p.b, p.c, p.c, pref, kCandidates, r, &found) !=
      CUBLAS_STATUS_SUCCESS) {
    return;
  }
  const bool tiny = int64_t(g.M) * g.N * g.K * std::max(g.batch, 1) <= kTinyGemm;
  int pick = -1;
  for (int i = 0; i < found; ++i) {
    if (r[i].state != CUBLAS_STATUS_SUCCESS) continue;
    if (pick < 0) pick = i;
    if (!tiny || split_k(r[i].algo) == 1) {
      pick = i;
      break;
    }
  }
  if (pick >= 0) {
    p.algo = r[pick].algo;
    p.found = true;
  }
}

}  // namespace

bool lt_gemm(DeviceContext& ctx, const LtGemm& g) {
  if (!ctx.gemm_plans) ctx.gemm_plans = new GemmPlans;
  GemmPlans& s = *ctx.gemm_plans;
  if (!s.lt) PF_BLAS_CHECK(cublasLtCreate(&s.lt));
  const int align[3] = {alignment(g.A), alignment(g.B), alignment(g.C)};
  const int64_t kinds = (int64_t(g.type) << 32) | (int64_t(g.compute) << 8) | (int64_t(g.ta) << 4) | g.tb;
  const GemmKey key{{kinds, g.M, g.N, g.K, g.lda, g.ldb, g.ldc, g.sa, g.sb, g.sc, g.batch, align[0], align[1],
                     align[2]}};
  auto it = s.plans.find(key);
  if (it == s.plans.end()) {
    if (s.plans.size() >= kMaxPlans) s.plans.clear();
    it = s.plans.try_emplace(key).first;
    try {
      make_plan(it->second, s.lt, g, align, ctx.blas_workspace_bytes);
    } catch (...) {
      s.plans.erase(it);
      throw;
    }
  }
  const GemmPlan& p = it->second;
  if (!p.found) return false;
  PF_BLAS_CHECK(cublasLtMatmul(s.lt, p.op, g.alpha, g.A, p.a, g.B, p.b, g.beta, g.C, p.c, g.C, p.c, &p.algo,
                               ctx.blas_workspace, ctx.blas_workspace_bytes, ctx.stream));
  return true;
}

void release_gemm_plans(DeviceContext& ctx) noexcept {
  delete ctx.gemm_plans;
  ctx.gemm_plans = nullptr;
}

}  // namespace pyflame::backend::rocm
#endif
