// DNN library wrapper, cuDNN's graph ("backend") API (NVIDIA; see dnn.h):
// float16 and bfloat16 channels-last convolutions. cuDNN's legacy API picks
// no tensor-core NHWC kernel for these on Hopper; its operation graphs do
// (PyTorch reaches them this way). Each problem is one operation graph of a
// single convolution node (NHWC activations, a KRSC filter, fp32
// accumulation); mode-A heuristics rank the engine configurations, and the
// first that finalizes into an execution plan (skipping those that convert
// inputs down or reduce in reduced precision) is kept per problem and
// handle, in memory. A problem with no plan is remembered too and runs
// through the legacy API (dnn_cudnn.cc), which stays the reference.
#if !defined(__HIP_PLATFORM_AMD__)
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/rocm/dnn_vendor.h"
#include "pyflame/errors.h"

namespace pyflame::backend::rocm::dnn::detail {

namespace {

// A plan-building step failed: the problem falls back to the legacy API.
struct NoPlan : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string status_text(cudnnStatus_t st, const char* call) {
  char last[512] = {0};
  cudnnGetLastErrorString(last, sizeof last);
  std::string s = std::string(call) + " failed: " + cudnnGetErrorString(st);
  if (last[0]) s += std::string(" (") + last + ")";
  return s;
}

void check(cudnnStatus_t st, const char* call) {
  if (st != CUDNN_STATUS_SUCCESS) throw NoPlan(status_text(st, call));
}

// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  Desc() = default;
  explicit Desc(cudnnBackendDescriptorType_t type) {
    check(cudnnBackendCreateDescriptor(type, &d_), "cudnnBackendCreateDescriptor");
  }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(Desc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  Desc& operator=(Desc&& o) noexcept {
    if (this != &o) {
      if (d_) cudnnBackendDestroyDescriptor(d_);
      d_ = std::exchange(o.d_, nullptr);
    }
    return *this;
  }
  cudnnBackendDescriptor_t get() const { return d_; }
  // For attributes that take descriptors: the address of the handle.
  const cudnnBackendDescriptor_t* addr() const { return &d_; }
  cudnnBackendDescriptor_t* ptr() { return &d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// cudnnBackendSetAttribute naming the attribute on failure.
#define PF_GRAPH_SET(desc, attr, type, count, values)                                            \
  check(cudnnBackendSetAttribute((desc).get(), attr, type, static_cast<int64_t>(count), values), \
        "cudnnBackendSetAttribute(" #attr ")")

void finalize(Desc& d, const char* what) { check(cudnnBackendFinalize(d.get()), what); }

std::vector<int64_t> wide(const std::vector<int>& v) { return {v.begin(), v.end()}; }

// The variant pack's names of the three operands.
constexpr int64_t kUidX = 1, kUidW = 2, kUidY = 3;

Desc tensor(int64_t uid, cudnnDataType_t type, const std::vector<int>& dims, const std::vector<int>& strides,
            int64_t alignment) {
  Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const std::vector<int64_t> d = wide(dims), s = wide(strides);
  PF_GRAPH_SET(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  PF_GRAPH_SET(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, d.size(), d.data());
  PF_GRAPH_SET(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, s.size(), s.data());
  PF_GRAPH_SET(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  PF_GRAPH_SET(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  finalize(t, "cudnnBackendFinalize(tensor)");
  return t;
}

// Cross-correlation with symmetric padding, accumulated in fp32. Groups are
// implied by the tensors: x has groups times the filter's channels.
Desc convolution(const Lifted& L) {
  Desc c(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t nsp = L.nsp;
  const std::vector<int64_t> pad = wide(L.pad), stride = wide(L.stride), dil = wide(L.dil);
  PF_GRAPH_SET(c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
  PF_GRAPH_SET(c, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  PF_GRAPH_SET(c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nsp);
  PF_GRAPH_SET(c, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, nsp, dil.data());
  PF_GRAPH_SET(c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, nsp, stride.data());
  PF_GRAPH_SET(c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, nsp, pad.data());
  PF_GRAPH_SET(c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, nsp, pad.data());
  finalize(c, "cudnnBackendFinalize(convolution)");
  return c;
}

// The attribute names of one direction's operation node.
struct OpAttrs {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t alpha, beta, conv, x, w, y;
};

OpAttrs op_attrs(ConvDir dir) {
  switch (dir) {
    case ConvDir::Forward:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y};
    case ConvDir::BackwardData:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY};
    case ConvDir::BackwardWeights:
      break;
  }
  return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY};
}

const char* dir_name(ConvDir dir) {
  switch (dir) {
    case ConvDir::Forward: return "graph_conv_fwd";
    case ConvDir::BackwardData: return "graph_conv_bwd_data";
    case ConvDir::BackwardWeights: break;
  }
  return "graph_conv_bwd_weights";
}

const char* fn_name(ConvDir dir) {
  switch (dir) {
    case ConvDir::Forward: return "conv";
    case ConvDir::BackwardData: return "conv_transpose";
    case ConvDir::BackwardWeights: break;
  }
  return "conv_weight_grad";
}

// An execution plan and everything it was built from (kept alive with it).
struct Plan {
  std::vector<Desc> parts;
  Desc plan;
  int64_t workspace = 0;
  // The variant pack of the latest run and the addresses it names (x, w, y,
  // workspace): a caching allocator hands a loop the same addresses call
  // after call, and building and finalizing a pack costs host time each run.
  // Guarded like the plan's handle (its lock, or a bundle's one thread).
  Desc pack;
  const void* pack_ptrs[4] = {};
};

// Whether an engine configuration's numerics match the legacy path's:
// inputs read at their precision, products summed in fp32.
bool full_precision(const Desc& cfg) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t n = 0;
  check(cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                 engine.ptr()),
        "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINECFG_ENGINE)");
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  n = 0;
  check(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes),
        "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINE_NUMERICAL_NOTE)");
  for (int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; ++i) {
    if (notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
        notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) {
      return false;
    }
  }
  return true;
}

// The engine configurations mode-A heuristics give for the graph, best first.
std::vector<Desc> ranked_configs(const Desc& graph) {
  Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  PF_GRAPH_SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, graph.addr());
  PF_GRAPH_SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  finalize(heur, "cudnnBackendFinalize(engine heuristics)");
  int64_t count = 0;
  check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                 &count, nullptr),
        "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS)");
  std::vector<Desc> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(cfgs.back().get());
  }
  int64_t got = 0;
  if (count > 0) {
    check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                   &got, raw.data()),
          "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS)");
  }
  cfgs.resize(static_cast<size_t>(std::min(got, count)));
  return cfgs;
}

// The plan of one problem, or NoPlan (saying why) when cuDNN builds none.
std::shared_ptr<Plan> build_plan(cudnnHandle_t h, ConvDir dir, const Lifted& L, cudnnDataType_t type,
                                 int64_t alignment) {
  auto P = std::make_shared<Plan>();
  std::vector<Desc>& parts = P->parts;
  parts.push_back(tensor(kUidX, type, L.x, L.strides(L.x), alignment));
  parts.push_back(tensor(kUidW, type, L.w, L.strides(L.w), alignment));
  parts.push_back(tensor(kUidY, type, L.y, L.strides(L.y), alignment));
  parts.push_back(convolution(L));
  const OpAttrs a = op_attrs(dir);
  Desc op(a.type);
  const float alpha = 1.0f, beta = 0.0f;
  PF_GRAPH_SET(op, a.alpha, CUDNN_TYPE_FLOAT, 1, &alpha);
  PF_GRAPH_SET(op, a.beta, CUDNN_TYPE_FLOAT, 1, &beta);
  PF_GRAPH_SET(op, a.conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, parts[3].addr());
  PF_GRAPH_SET(op, a.x, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, parts[0].addr());
  PF_GRAPH_SET(op, a.w, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, parts[1].addr());
  PF_GRAPH_SET(op, a.y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, parts[2].addr());
  finalize(op, "cudnnBackendFinalize(convolution operation)");
  Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  PF_GRAPH_SET(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  PF_GRAPH_SET(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, op.addr());
  finalize(graph, "cudnnBackendFinalize(operation graph)");
  std::vector<Desc> cfgs = ranked_configs(graph);
  parts.push_back(std::move(op));
  parts.push_back(std::move(graph));
  int numerics = 0, oversized = 0;
  std::string last_error;
  for (Desc& cfg : cfgs) {
    try {
      if (!full_precision(cfg)) {
        ++numerics;
        continue;
      }
      Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      PF_GRAPH_SET(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
      PF_GRAPH_SET(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, cfg.addr());
      finalize(plan, "cudnnBackendFinalize(execution plan)");
      int64_t ws = 0, n = 0;
      check(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                     &ws),
            "cudnnBackendGetAttribute(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)");
      if (ws < 0 || static_cast<uint64_t>(ws) > kMaxWorkspace) {
        ++oversized;
        continue;
      }
      P->plan = std::move(plan);
      P->workspace = ws;
      P->parts.push_back(std::move(cfg));
      return P;
    } catch (const NoPlan& e) {
      last_error = e.what();  // this configuration does not build here: try the next
    }
  }
  throw NoPlan("no execution plan from " + std::to_string(cfgs.size()) + " mode-A engine configurations (" +
               std::to_string(numerics) + " convert inputs down or reduce in reduced precision, " +
               std::to_string(oversized) + " ask for more workspace than the limit" +
               (last_error.empty() ? std::string() : "; last error: " + last_error) + ")");
}

// The largest power of two up to 16 dividing every operand's address: what
// the plan may assume (chunks and views are not always 16-byte aligned).
int64_t alignment_of(std::initializer_list<const void*> ptrs) {
  int64_t a = 16;
  for (const void* p : ptrs) {
    while (a > 1 && reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(a) != 0) a /= 2;
  }
  return a;
}

// Plans per problem and handle (a plan is built with, and run through, one
// handle); null for a problem with no plan. Process lifetime, like the
// handles: never destroyed, so nothing is torn down after cuDNN is gone.
struct PlanCache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<Plan>> plans;
};

PlanCache& plan_cache() {
  static PlanCache* cache = new PlanCache;
  return *cache;
}

void execute(DnnHandle& H, DeviceContext& ctx, ConvDir dir, Plan& P, void* x, void* w, void* y) {
  auto buf = run_workspace(ctx, static_cast<size_t>(P.workspace));
  const int64_t uids[3] = {kUidX, kUidW, kUidY};
  void* ptrs[3] = {x, w, y};
  void* ws = ptr_of(buf);
  const char* fn = fn_name(dir);
  try {
    const void* now[4] = {x, w, y, ws};
    if (!P.pack.get() || !std::equal(now, now + 4, P.pack_ptrs)) {
      P.pack = Desc();  // a pack that fails to build is not kept
      Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
      PF_GRAPH_SET(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
      PF_GRAPH_SET(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
      PF_GRAPH_SET(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
      finalize(pack, "cudnnBackendFinalize(variant pack)");
      P.pack = std::move(pack);
      std::copy(now, now + 4, P.pack_ptrs);
    }
    check(cudnnBackendExecute(H.h, P.plan.get(), P.pack.get()), "cudnnBackendExecute");
  } catch (const NoPlan& e) {
    throw RuntimeError(errmsg(fn, e.what()));  // a built plan that does not run is an error
  }
}

}  // namespace

bool conv_graph_chunk(DeviceContext& ctx, ConvDir dir, const Lifted& L, Dtype dt, int64_t groups, const void* x,
                      const void* w, const void* y) {
  for (const auto* dims : {&L.x, &L.w, &L.y}) {
    for (int d : *dims) {
      if (d <= 0) return false;  // empty problems: the legacy path's rules
    }
  }
  const int64_t alignment = alignment_of({x, w, y});
  DnnHandle& H = handle_for(ctx);
  const std::string key = conv_key(dir_name(dir), L, dt, groups, ctx.device) + "|align=" +
                          std::to_string(alignment) + "|handle=" +
                          std::to_string(reinterpret_cast<uintptr_t>(H.h));
  GraphCounters& counters = graph_counters();
  PlanCache& cache = plan_cache();
  // The key names the handle, so the handle's lock (none on a multi_stream
  // bundle, which one thread owns) orders every lookup and build of it.
  const auto lk = lock_handle(ctx, H);
  std::shared_ptr<Plan> plan;
  bool known = false;
  {
    std::lock_guard ck(cache.mu);
    if (auto it = cache.plans.find(key); it != cache.plans.end()) {
      known = true;
      plan = it->second;
    }
  }
  if (!known) {
    try {
      plan = build_plan(H.h, dir, L, dnn_type(dt), alignment);
      counters.built.fetch_add(1);
    } catch (const NoPlan& e) {
      counters.note_failure(key + ": " + e.what());
    }
    std::lock_guard ck(cache.mu);
    cache.plans.emplace(key, plan);
  }
  if (!plan) return false;
  execute(H, ctx, dir, *plan, const_cast<void*>(x), const_cast<void*>(w), const_cast<void*>(y));
  counters.runs.fetch_add(1);
  return true;
}

}  // namespace pyflame::backend::rocm::dnn::detail

#undef PF_GRAPH_SET

#endif  // !__HIP_PLATFORM_AMD__
