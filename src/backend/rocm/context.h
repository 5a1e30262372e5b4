// Per-device execution context: the compute stream every kernel, copy and
// BLAS call of an evaluation runs on, the BLAS, DNN and solver handles bound to it,
// and its allocator pool. Contexts live for the whole process (never
// destroyed: tearing down streams after the runtime has shut down at exit
// would fail).
//
// The evaluation context (docs/design/eval_context.md): the eval loop holds a
// runtime::GpuEvaluation for the length of one evaluation; the first time
// the evaluation touches a device it resolves that device's context (its own
// multi_stream bundle, or the shared one) and keeps it, so context(device)
// inside an evaluation is a thread-local read, without a lock.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include "backend/rocm/gpu/libs.h"
#include "backend/rocm/gpu/runtime.h"
#include "pyflame/backend/rocm.h"

namespace pyflame::backend::rocm {

// The most devices a process addresses (get_device_count() counts no more).
constexpr int kMaxDevices = 64;

class ROCmMemoryManager;
class ROCmBLAS;
struct StreamPool;
namespace dnn {
struct DnnHandle;
}
namespace solver {
struct SolverHandle;
}
struct GemmPlans;  // blas_lt.cc

struct DeviceContext {
  int device = 0;
  hipStream_t stream = nullptr;           // non-blocking: never the legacy null stream
  gpu::blas_handle_t blas = nullptr;      // bound to `stream`
  std::mutex blas_mu;                     // a BLAS handle is used by one thread at a time
  void* blas_workspace = nullptr;
  size_t blas_workspace_bytes = 0;
  GemmPlans* gemm_plans = nullptr;       // cuBLASLt / hipBLASLt algorithm per GEMM problem, under blas's rule
  int multiprocessors = 0;
  int wave_size = 32;
  // Arrival counters of the one-pass row reductions (reduce.hip) and of the decode attention's
  // chunk merge (llm.hip), one per row: zero between kernels, each kernel's last block leaves
  // them so. Per context, since kernels on one stream run one after another.
  unsigned* row_counters = nullptr;
  bool bundle = false;  // a multi_stream bundle rather than the device's shared context
  ROCmMemoryManager* memory = nullptr;  // the device's caching allocator
  StreamPool* pool = nullptr;           // its pool for `stream`
  std::atomic<ROCmBLAS*> blas_api{nullptr};       // get_blas's wrapper, made on first use
  std::atomic<dnn::DnnHandle*> dnn{nullptr};      // the DNN handle bound to `stream`, made on first use
  std::atomic<solver::SolverHandle*> solver{nullptr};  // the dense solver handle, likewise (solver.h)
};

// The context this thread's work on `device` uses: inside an evaluation with
// multi_stream on, the evaluation's own bundle (taken on first use);
// otherwise the device's shared context, created on first use. Inside an
// evaluation, after the first call for a device: no lock (eval_context.cc).
DeviceContext& context(int device);
DeviceContext& shared_context(int device);  // lock-free once made (context.cc)
// A new context (stream, handles, workspace, pool) on `device`.
DeviceContext* create_context(int device);
// Raises for an index outside the process's devices.
void check_device(int device);
// The stream context(device) would use, without taking a bundle.
hipStream_t current_stream(int device);
// Whether this thread is inside an evaluation that takes multi_stream bundles.
bool using_bundles();
// Hands a pinned staging block whose copy is queued on ctx's stream to the
// evaluation that will wait for that stream at its end (a multi_stream
// bundle it took): released then, with no event. False where no such wait
// comes (shared stream, no evaluation): the caller releases it after the
// stream (PinnedMemoryPool::release_after).
bool release_at_finish(DeviceContext& ctx, void* pinned);
// As release_at_finish for a download's staging block (D2H queued on ctx's
// stream): after that wait, `bytes` go from it to `dst`, then it is
// released. Only in the outermost evaluation, whose finish() does the wait.
bool download_at_finish(DeviceContext& ctx, void* pinned, void* dst, size_t bytes);
// Orders everything later queued on `after` behind what `before` holds now.
void order_streams(hipStream_t before, hipStream_t after);

// Graph capture (graph.cc): private contexts, pooled per device and reused
// once their graph is gone, and the one this thread's evaluations use
// while it captures (null: none).
DeviceContext* take_capture_context(int device);
void give_back_capture_context(DeviceContext* c);
void set_capture_context(DeviceContext* c);

// Device memory for this thread's work on ctx's stream (a node's buffer or
// kernel scratch), freed back to ctx's pool in stream order.
std::shared_ptr<Buffer> allocate_on(DeviceContext& ctx, size_t bytes);

// A range check whose verdict waits for the end of the evaluation: returns
// `words` zeroed device words (ordered on ctx's stream) that a kernel sets
// when it finds a bad value; once the evaluation's streams have finished,
// the words are read and, if the first is non-zero, `raise` throws the
// error from them. The words are sub-allocated from slabs (one allocation,
// memset and copy per slab, not per check; one wait per stream). Checks raise in the
// order they were made. Only inside an evaluation (eval_gpu always is).
using CheckRaise = std::function<void(const int64_t* words)>;
int64_t* deferred_check(DeviceContext& ctx, int words, CheckRaise raise);

// While a graph is captured (graph.cc), a deferred check is the graph's: its
// words (zeroed by the graph itself) live as long as the graph and are read
// after each launch. take_captured_checks() hands this thread's over (and
// forgets them); read_captured_checks copies each slab's words once after
// the work queued on `stream`, waits once, and raises the first failed check.
struct CapturedCheck {
  std::shared_ptr<Buffer> words;  // the slab (shared by the graph's checks)
  size_t at;                      // this check's first word in it
  int count;
  CheckRaise raise;
};
std::vector<CapturedCheck> take_captured_checks();
void read_captured_checks(hipStream_t stream, const std::vector<CapturedCheck>& checks);

// Makes `device` current for this thread while in scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

// Grid size for a grid-stride loop over n elements with `threads` per block.
unsigned grid_for(const DeviceContext& ctx, int64_t n, int threads, int per_thread = 1);

// Poisoning of fresh device buffers (PYFLAME_GPU_POISON=1): catches kernels
// that leave outputs unwritten.
bool poison_allocations();

}  // namespace pyflame::backend::rocm
