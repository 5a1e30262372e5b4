// Node buffers on the GPU and host<->device transfers. Uploads and downloads
// stage through the pinned pool and run on the device's compute stream; a
// download waits for that stream only.
#include <cstring>

#include "backend/rocm/context.h"
#include "backend/rocm/memory.h"
#include "ir/primitives.h"
#include "pyflame/backend/rocm.h"
#include "runtime/backend.h"

namespace pyflame::backend::rocm {

namespace {
// Larger transfers skip staging: the runtime copies pageable memory itself.
constexpr size_t kStagingLimit = 64u << 20;

void free_buffer(void* p, void* ctx) {
  auto* c = static_cast<DeviceContext*>(ctx);
  try {
    // The block is reused in stream order on the stream that allocated it.
    // Freed from another stream (multi_stream: a buffer made by one
    // evaluation, last read by another), that stream's pending reads must
    // come first.
    // Shared context and no bundles in use: one stream, nothing to order
    // (the common case, decided without the context lookup).
    const hipStream_t cur = c->bundle || using_bundles() ? current_stream(c->device) : c->stream;
    if (cur != c->stream) {
      DeviceGuard g(c->device);
      try {
        order_streams(cur, c->stream);
      } catch (...) {
        (void)hipStreamSynchronize(cur);
      }
    }
    c->memory->deallocate_in(*c->pool, p);
  } catch (...) {
    // A destructor must not throw; the block is lost to the cache, not leaked twice.
  }
}
}  // namespace

std::shared_ptr<Buffer> allocate_on(DeviceContext& ctx, size_t bytes) {
  void* p = bytes ? ctx.memory->allocate_in(*ctx.pool, bytes) : nullptr;
  if (p && poison_allocations()) PF_HIP_CHECK(hipMemsetAsync(p, 0xff, bytes, ctx.stream));
  return std::make_shared<Buffer>(p, bytes, Device::rocm(ctx.device), bytes ? &free_buffer : nullptr, &ctx);
}

std::shared_ptr<Buffer> allocate_buffer(int device, size_t bytes) { return allocate_on(context(device), bytes); }

namespace {
// A download of `src` into `dst`. `deferred`: a DownloadTo's, which may
// leave its bytes in the staging block until the evaluation's final wait
// (download_at_finish); else dst holds them when this returns.
void download(const Tensor& src, void* dst, bool deferred) {
  const size_t bytes = src.nbytes();
  if (!bytes) return;
  if (!src.is_row_contiguous()) throw RuntimeError("[to] download needs a row-major tensor");
  DeviceContext& ctx = context(src.device().index);
  DeviceGuard g(ctx.device);
  if (bytes > kStagingLimit) {
    PF_HIP_CHECK(hipMemcpyAsync(dst, src.raw_data(), bytes, hipMemcpyDeviceToHost, ctx.stream));
    PF_HIP_CHECK(hipStreamSynchronize(ctx.stream));
    return;
  }
  PinnedMemoryPool& pool = get_pinned_pool();
  void* staging = pool.acquire(bytes);
  hipError_t err = hipMemcpyAsync(staging, src.raw_data(), bytes, hipMemcpyDeviceToHost, ctx.stream);
  if (err == hipSuccess && deferred && download_at_finish(ctx, staging, dst, bytes)) return;
  if (err == hipSuccess) err = hipStreamSynchronize(ctx.stream);
  if (err == hipSuccess) std::memcpy(dst, staging, bytes);
  pool.release(staging);
  PF_HIP_CHECK(err);
}
}  // namespace

void copy_to_host(const Tensor& src, void* dst) { download(src, dst, false); }

// Host data (row-major, evaluated) into a device buffer, on its stream.
void upload(const void* src, size_t bytes, void* dst, DeviceContext& ctx) {
  DeviceGuard g(ctx.device);
  if (bytes > kStagingLimit) {
    PF_HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyHostToDevice, ctx.stream));
    // A pageable source may be freed right after: wait until it has been read.
    PF_HIP_CHECK(hipStreamSynchronize(ctx.stream));
    return;
  }
  PinnedMemoryPool& pool = get_pinned_pool();
  void* staging = pool.acquire(bytes);
  std::memcpy(staging, src, bytes);
  const hipError_t err = hipMemcpyAsync(dst, staging, bytes, hipMemcpyHostToDevice, ctx.stream);
  if (err != hipSuccess) {
    pool.release(staging);  // nothing was queued
    PF_HIP_CHECK(err);
  }
  if (!release_at_finish(ctx, staging)) pool.release_after(staging, ctx.stream);
}

}  // namespace pyflame::backend::rocm

namespace pyflame {

// Destination is a GPU: an upload from the host, or a copy through the host
// between two GPUs.
void ToDevice::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  using namespace backend::rocm;
  const Tensor& x = in[0];
  DeviceContext& ctx = context(out.device().index);
  if (x.device().is_cpu()) {
    upload(x.raw_data(), out.nbytes(), out.raw_data(), ctx);
  } else {
    std::vector<char> host(out.nbytes());
    copy_to_host(x, host.data());
    upload(host.data(), host.size(), out.raw_data(), ctx);
    PF_HIP_CHECK(hipStreamSynchronize(ctx.stream));  // `host` dies at return
  }
}

void runtime::download_gpu(const Tensor& src, void* dst) { backend::rocm::download(src, dst, true); }

// Its output is on the host: never run here.
void DownloadTo::eval_gpu(const std::vector<Tensor>&, Tensor&) {
  throw RuntimeError(errmsg(name(), "internal error: a download evaluated on a GPU"));
}

}  // namespace pyflame
