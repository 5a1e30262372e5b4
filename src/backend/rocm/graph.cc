// Graph replay on the GPU (docs/design/replay.md): an evaluation captured
// as a HIP/CUDA graph on a private context, and its replays on the calling
// evaluation's stream.
#include <mutex>

#include "backend/rocm/context.h"
#include "backend/rocm/memory.h"
#include "pyflame/errors.h"
#include "runtime/backend.h"

namespace pyflame::runtime {

using namespace backend::rocm;

class GpuGraph {
 public:
  ~GpuGraph();
  DeviceContext* ctx = nullptr;  // private: its stream captured, its pool holds the graph's memory
  hipGraph_t graph = nullptr;
  hipGraphExec_t exec = nullptr;
  hipEvent_t done = nullptr;  // after the last replay's copies out
  uint64_t epoch = 0;         // the allocator's release epoch at capture
  std::vector<CapturedCheck> checks;  // range checks the graph makes, read after each launch
  std::mutex mu;              // one replay enqueued at a time
};

GpuGraph::~GpuGraph() {
  int prev = -1;
  (void)hipGetDevice(&prev);
  (void)hipSetDevice(ctx->device);
  if (done) {
    (void)hipEventSynchronize(done);  // the last replay has finished with its memory
    (void)hipEventDestroy(done);
  }
  if (exec) (void)hipGraphExecDestroy(exec);
  if (graph) (void)hipGraphDestroy(graph);
  (void)hipStreamSynchronize(ctx->stream);
  checks.clear();  // their words go back to the private pool before the context does
  if (prev >= 0) (void)hipSetDevice(prev);
  give_back_capture_context(ctx);
}

namespace {

// This thread's evaluations use the capture's context while it lives.
struct CaptureScope {
  explicit CaptureScope(DeviceContext* c) { set_capture_context(c); }
  ~CaptureScope() { set_capture_context(nullptr); }
};

std::string hip_reason(hipError_t e) { return std::string(hipGetErrorName(e)) + ": " + hipGetErrorString(e); }

}  // namespace

std::shared_ptr<GpuGraph> gpu_graph_capture(int device, const std::function<void()>& run, std::string& why) {
  auto g = std::make_shared<GpuGraph>();
  g->ctx = take_capture_context(device);
  DeviceGuard dg(device);
  const hipStream_t caller = context(device).stream;  // this thread's (its multi_stream bundle's)
  order_streams(shared_context(device).stream, g->ctx->stream);  // inputs written there come first
  order_streams(caller, g->ctx->stream);
  CaptureScope scope(g->ctx);
  try {
    run();  // warm-up: kernels built, handles made, blocks cached in the private pool
  } catch (const std::exception& e) {
    take_captured_checks();
    why = e.what();
    return nullptr;
  }
  take_captured_checks();  // the warm-up's: its values are not kept
  // Everything the capture reads is written before it begins, on the shared
  // stream or this thread's: the capture then needs no waits on other
  // streams (order_streams skips them). Not a device synchronize: another
  // thread may be capturing.
  PF_HIP_CHECK(hipStreamSynchronize(shared_context(device).stream));
  PF_HIP_CHECK(hipStreamSynchronize(caller));
  PF_HIP_CHECK(hipStreamSynchronize(g->ctx->stream));
  hipError_t err = hipStreamBeginCapture(g->ctx->stream, hipStreamCaptureModeThreadLocal);
  if (err != hipSuccess) {
    (void)hipGetLastError();
    why = "stream capture failed to begin (" + hip_reason(err) + ")";
    return nullptr;
  }
  try {
    run();
  } catch (const std::exception& e) {
    why = e.what();
  }
  g->checks = take_captured_checks();
  hipGraph_t graph = nullptr;
  err = hipStreamEndCapture(g->ctx->stream, &graph);
  (void)hipGetLastError();
  if (why.empty() && err != hipSuccess) why = "the evaluation could not be captured (" + hip_reason(err) + ")";
  if (!why.empty()) {
    if (graph) (void)hipGraphDestroy(graph);
    return nullptr;
  }
  g->graph = graph;
  err = hipGraphInstantiateWithFlags(&g->exec, graph, 0);
  if (err == hipSuccess) err = hipEventCreateWithFlags(&g->done, hipEventDisableTiming);
  if (err != hipSuccess) {
    (void)hipGetLastError();
    why = "the captured graph could not be instantiated (" + hip_reason(err) + ")";
    return nullptr;
  }
  // The warm-up may still run on the private stream; the graph's first
  // replay (on the caller's stream) writes the same memory.
  err = hipStreamSynchronize(g->ctx->stream);
  if (err != hipSuccess) {
    (void)hipGetLastError();
    why = "the warm-up run failed (" + hip_reason(err) + ")";
    return nullptr;
  }
  g->epoch = release_epoch();
  return g;
}

bool gpu_graph_replay(GpuGraph& g, const std::vector<DeviceCopy>& in, const std::vector<DeviceCopy>& out) {
  if (release_epoch() != g.epoch) return false;
  DeviceContext& ctx = context(g.ctx->device);
  DeviceGuard dg(ctx.device);
  std::lock_guard lk(g.mu);
  PF_HIP_CHECK(hipStreamWaitEvent(ctx.stream, g.done, 0));  // the previous replay, on any stream
  for (const DeviceCopy& c : in) {
    if (c.bytes) PF_HIP_CHECK(hipMemcpyAsync(c.dst, c.src, c.bytes, hipMemcpyDeviceToDevice, ctx.stream));
  }
  PF_HIP_CHECK(hipGraphLaunch(g.exec, ctx.stream));
  // A failed range check raises as the evaluation would have, before any
  // result (a parameter's new value) is copied out.
  read_captured_checks(ctx.stream, g.checks);
  for (const DeviceCopy& c : out) {
    if (c.bytes) PF_HIP_CHECK(hipMemcpyAsync(c.dst, c.src, c.bytes, hipMemcpyDeviceToDevice, ctx.stream));
  }
  PF_HIP_CHECK(hipEventRecord(g.done, ctx.stream));
  return true;
}

void gpu_copy(int device, const std::vector<DeviceCopy>& copies) {
  DeviceContext& ctx = context(device);
  DeviceGuard dg(ctx.device);
  for (const DeviceCopy& c : copies) {
    if (c.bytes) PF_HIP_CHECK(hipMemcpyAsync(c.dst, c.src, c.bytes, hipMemcpyDeviceToDevice, ctx.stream));
  }
}

}  // namespace pyflame::runtime
