#include "backend/rocm/context.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include "backend/reduce_shape.h"
#include "backend/rocm/gpu/platform.h"
#include "backend/rocm/memory.h"
#include "pyflame/backend/rocm.h"
#include "pyflame/errors.h"
#include "runtime/settings.h"

namespace pyflame::backend::rocm {

namespace {
std::mutex g_ctx_mu;  // creation only: a made context is found without it
std::atomic<DeviceContext*> g_contexts[kMaxDevices];  // leaked on purpose (see header)
std::atomic<bool> g_tf32{settings::allow_tf32()};
}  // namespace

DeviceContext* create_context(int device) {
  DeviceGuard g(device);
  auto* ctx = new DeviceContext;
  ctx->device = device;
  PF_HIP_CHECK(hipStreamCreateWithFlags(&ctx->stream, hipStreamNonBlocking));
  ctx->blas = gpu::create_blas_handle(ctx->stream);
  // A fixed workspace keeps the BLAS library from allocating during a call.
  ctx->blas_workspace_bytes = 32u << 20;
  PF_HIP_CHECK(hipMalloc(&ctx->blas_workspace, ctx->blas_workspace_bytes));
#if defined(__HIP_PLATFORM_AMD__)
  PF_BLAS_CHECK(rocblas_set_workspace(ctx->blas, ctx->blas_workspace, ctx->blas_workspace_bytes));
#else
  PF_BLAS_CHECK(cublasSetWorkspace(ctx->blas, ctx->blas_workspace, ctx->blas_workspace_bytes));
#endif
  // One arrival counter per row a reduction or a decode attention may split (reduce_shape.h).
  PF_HIP_CHECK(hipMalloc(&ctx->row_counters, kMaxSplitRows * sizeof(unsigned)));
  PF_HIP_CHECK(hipMemsetAsync(ctx->row_counters, 0, kMaxSplitRows * sizeof(unsigned), ctx->stream));
  ctx->multiprocessors = gpu::device_attribute(hipDeviceAttributeMultiprocessorCount, device);
  ctx->wave_size = gpu::device_wave_size(device);
  ctx->memory = &get_memory_manager(device);
  ctx->pool = &ctx->memory->pool(ctx->stream);
  return ctx;
}

void check_device(int device) {
  if (device < 0 || device >= get_device_count()) {
    throw RuntimeError(errmsg("rocm", "invalid device index " + std::to_string(device)));
  }
}

DeviceContext& shared_context(int device) {
  check_device(device);
  if (DeviceContext* c = g_contexts[device].load(std::memory_order_acquire)) return *c;
  std::lock_guard lk(g_ctx_mu);
  if (!g_contexts[device].load()) g_contexts[device].store(create_context(device), std::memory_order_release);
  return *g_contexts[device].load();
}

namespace {
// One reusable event per device for each thread that orders streams:
// creating an event takes a driver-wide lock, recording one does not. A
// wait binds to the record that precedes it, so re-recording the event
// later (this thread's next call) cannot disturb a wait already queued.
struct OrderEvents {
  hipEvent_t ev[kMaxDevices] = {};
  ~OrderEvents() {
    for (hipEvent_t e : ev) {
      if (e) (void)hipEventDestroy(e);  // pending waits keep what they need
    }
  }
};
thread_local OrderEvents t_order_events;

hipEvent_t order_event(int device) {
  hipEvent_t& e = t_order_events.ev[device];
  if (!e) PF_HIP_CHECK(hipEventCreateWithFlags(&e, hipEventDisableTiming));
  return e;
}
}  // namespace

void order_streams(hipStream_t before, hipStream_t after) {
  // A capturing stream cannot wait on work outside its capture; a capture
  // begins after a device synchronize (graph.cc), so that work is done.
  hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
  if (hipStreamIsCapturing(after, &status) == hipSuccess && status != hipStreamCaptureStatusNone) return;
  // Callers have the streams' device current (an event records only on
  // streams of the device it was made on).
  int device = 0;
  PF_HIP_CHECK(hipGetDevice(&device));
  const hipEvent_t ev = order_event(device);
  PF_HIP_CHECK(hipEventRecord(ev, before));
  PF_HIP_CHECK(hipStreamWaitEvent(after, ev, 0));
}

DeviceGuard::DeviceGuard(int device) {
  PF_HIP_CHECK(hipGetDevice(&prev_));
  if (prev_ != device) PF_HIP_CHECK(hipSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  int cur = -1;
  if (hipGetDevice(&cur) == hipSuccess && cur != prev_) (void)hipSetDevice(prev_);
}

unsigned grid_for(const DeviceContext& ctx, int64_t n, int threads, int per_thread) {
  int64_t blocks = (n + int64_t(threads) * per_thread - 1) / (int64_t(threads) * per_thread);
  int64_t cap = int64_t(ctx.multiprocessors) * 16;  // enough waves in flight, then grid-stride
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, cap)));
}

bool allow_tf32() { return g_tf32.load(); }
void set_allow_tf32(bool on) { g_tf32 = on; }

bool poison_allocations() {
  return settings::gpu_poison();
}

}  // namespace pyflame::backend::rocm
