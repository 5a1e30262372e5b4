#include "backend/rocm/context.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include "backend/rocm/gpu/platform.h"
#include "pyflame/backend/rocm.h"
#include "pyflame/errors.h"
#include "runtime/settings.h"

namespace pyflame::backend::rocm {

namespace {
std::mutex g_ctx_mu;
std::vector<DeviceContext*> g_contexts;  // leaked on purpose (see header)
std::atomic<bool> g_tf32{settings::allow_tf32()};

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
  ctx->multiprocessors = gpu::device_attribute(hipDeviceAttributeMultiprocessorCount, device);
  ctx->wave_size = gpu::device_wave_size(device);
  return ctx;
}
}  // namespace

DeviceContext& shared_context(int device) {
  std::lock_guard lk(g_ctx_mu);
  if (device < 0 || device >= get_device_count()) {
    throw RuntimeError(errmsg("rocm", "invalid device index " + std::to_string(device)));
  }
  if (g_contexts.size() <= static_cast<size_t>(device)) g_contexts.resize(device + 1, nullptr);
  if (!g_contexts[device]) g_contexts[device] = create_context(device);
  return *g_contexts[device];
}

void order_streams(hipStream_t before, hipStream_t after) {
  hipEvent_t ev;
  PF_HIP_CHECK(hipEventCreateWithFlags(&ev, hipEventDisableTiming));
  hipError_t err = hipEventRecord(ev, before);
  if (err == hipSuccess) err = hipStreamWaitEvent(after, ev, 0);
  (void)hipEventDestroy(ev);  // released once the wait has happened
  PF_HIP_CHECK(err);
}

// ---- multi_stream bundles: whole contexts, pooled per device and reused,
// so their streams, handles and cached memory stay warm across evaluations.

namespace {
std::atomic<bool> g_multi_stream{false};
std::mutex g_pool_mu;
std::vector<std::vector<DeviceContext*>> g_free_bundles;  // per device; leaked like contexts

struct ThreadStreams {
  bool active = false;                  // inside an evaluation that takes bundles
  std::vector<DeviceContext*> bundles;  // per device, taken on first use
};
thread_local ThreadStreams t_streams;

DeviceContext* take_bundle(int device) {
  DeviceContext& shared = shared_context(device);
  DeviceContext* b = nullptr;
  {
    std::lock_guard lk(g_pool_mu);
    if (g_free_bundles.size() <= static_cast<size_t>(device)) g_free_bundles.resize(device + 1);
    auto& pool = g_free_bundles[device];
    if (!pool.empty()) {
      b = pool.back();
      pool.pop_back();
    }
  }
  if (!b) {
    b = create_context(device);
    b->bundle = true;
  }
  // Work queued on the shared stream (uploads, earlier evaluations with
  // multi_stream off) comes first.
  DeviceGuard g(device);
  order_streams(shared.stream, b->stream);
  return b;
}

void give_back(DeviceContext* b) {
  std::lock_guard lk(g_pool_mu);
  g_free_bundles[b->device].push_back(b);
}
}  // namespace

DeviceContext& context(int device) {
  ThreadStreams& ts = t_streams;
  if (!ts.active) return shared_context(device);
  if (device < 0 || device >= get_device_count()) {
    throw RuntimeError(errmsg("rocm", "invalid device index " + std::to_string(device)));
  }
  if (ts.bundles.size() <= static_cast<size_t>(device)) ts.bundles.resize(device + 1, nullptr);
  if (!ts.bundles[device]) ts.bundles[device] = take_bundle(device);
  return *ts.bundles[device];
}

bool using_bundles() { return t_streams.active; }

hipStream_t current_stream(int device) {
  const ThreadStreams& ts = t_streams;
  if (ts.active && static_cast<size_t>(device) < ts.bundles.size() && ts.bundles[device]) {
    return ts.bundles[device]->stream;
  }
  return shared_context(device).stream;
}

bool multi_stream() { return g_multi_stream.load(); }
void set_multi_stream(bool on) { g_multi_stream = on; }

EvalStreams::EvalStreams() {
  // A nested evaluation (a custom backward evaluating inside backward())
  // keeps the outer one's bundles.
  if (g_multi_stream.load() && !t_streams.active) {
    t_streams.active = true;
    owner_ = true;
  }
}

void EvalStreams::finish() {
  if (!owner_) return;
  for (DeviceContext* b : t_streams.bundles) {
    if (!b) continue;
    DeviceGuard g(b->device);
    PF_HIP_CHECK(hipStreamSynchronize(b->stream));
  }
  finished_ = true;
}

EvalStreams::~EvalStreams() {
  if (!owner_) return;
  // After an error (finish() not reached) the streams are still drained
  // before going back to the pool, so the next evaluation starts clean.
  for (DeviceContext* b : t_streams.bundles) {
    if (!b) continue;
    if (!finished_) {
      int prev = -1;
      (void)hipGetDevice(&prev);
      (void)hipSetDevice(b->device);
      (void)hipStreamSynchronize(b->stream);
      if (prev >= 0) (void)hipSetDevice(prev);
    }
    give_back(b);
  }
  t_streams.bundles.clear();
  t_streams.active = false;
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
