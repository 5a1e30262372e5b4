// Graph replay on the GPU (docs/design/replay.md): an evaluation captured
// as a HIP/CUDA graph on a private context, and its replays on the calling
// evaluation's stream.
#include <algorithm>
#include <atomic>
#include <mutex>

#include "backend/rocm/context.h"
#include "backend/rocm/graph_io.h"
#include "backend/rocm/memory.h"
#include "pyflame/errors.h"
#include "runtime/backend.h"

namespace pyflame::runtime {

using namespace backend::rocm;

// A launchable form of the graph with its copies in and out as nodes, and
// the slot of the pointer table those nodes read. Slots rotate, so the host
// fills one while earlier launches may still read the others.
struct IoSlot {
  hipGraphExec_t exec = nullptr;
  hipEvent_t done = nullptr;  // after this slot's last launch
  bool launched = false;
};

class GpuGraph {
 public:
  static constexpr int kSlots = 3;
  ~GpuGraph();
  DeviceContext* ctx = nullptr;  // private: its stream captured, its pool holds the graph's memory
  hipGraph_t graph = nullptr;
  hipGraphExec_t exec = nullptr;
  hipEvent_t done = nullptr;  // after the last replay's copies out, by copy calls
  hipEvent_t last = nullptr;  // after the last replay, by either form
  // The streams `done` and `last` were recorded on: a replay on the same
  // stream is ordered after the last one without a wait.
  hipStream_t done_stream = nullptr, last_stream = nullptr;
  uint64_t epoch = 0;         // the allocator's release epoch at capture
  std::vector<CapturedCheck> checks;  // range checks the graph makes, read after each launch
  std::mutex mu;              // one replay enqueued at a time
  // The copies-as-nodes form (graph_io.h), built on the first replay that
  // can use it, for the copy sizes it had.
  IoSlot slots[kSlots];
  GraphCopy* table = nullptr;  // kSlots rows of one entry per copy, mapped host memory
  GraphCopy* table_dev = nullptr;  // the same memory as the device reads it
  std::vector<uint64_t> io_bytes;  // sizes of the copies in, then out
  size_t n_in = 0;
  int next_slot = 0;
  int io_builds = 0;  // a graph whose copy sizes keep changing stays with copy calls

  void drop_io();
  bool io_ready(const std::vector<DeviceCopy>& in, const std::vector<DeviceCopy>& out);
  bool build_io(const std::vector<DeviceCopy>& in, const std::vector<DeviceCopy>& out);
  void launch_io(hipStream_t stream, const std::vector<DeviceCopy>& in, const std::vector<DeviceCopy>& out);
};

GpuGraph::~GpuGraph() {
  int prev = -1;
  (void)hipGetDevice(&prev);
  (void)hipSetDevice(ctx->device);
  if (done) {
    (void)hipEventSynchronize(done);  // the last replay has finished with its memory
    (void)hipEventDestroy(done);
  }
  drop_io();
  if (exec) (void)hipGraphExecDestroy(exec);
  if (graph) (void)hipGraphDestroy(graph);
  (void)hipStreamSynchronize(ctx->stream);
  checks.clear();  // their words go back to the private pool before the context does
  if (prev >= 0) (void)hipSetDevice(prev);
  give_back_capture_context(ctx);
}

void GpuGraph::drop_io() {
  for (IoSlot& s : slots) {
    if (s.done) {
      (void)hipEventSynchronize(s.done);
      (void)hipEventDestroy(s.done);
    }
    if (s.exec) (void)hipGraphExecDestroy(s.exec);
    s = IoSlot{};
  }
  if (table) (void)hipHostFree(table);
  table = table_dev = nullptr;
  io_bytes.clear();
  last = done;  // the slots' launches are over (waited for above); their events are gone
  last_stream = done_stream;
}

bool GpuGraph::io_ready(const std::vector<DeviceCopy>& in, const std::vector<DeviceCopy>& out) {
  bool same = slots[0].exec && n_in == in.size() && io_bytes.size() == in.size() + out.size();
  for (size_t i = 0; same && i < io_bytes.size(); ++i) {
    same = io_bytes[i] == (i < n_in ? in[i].bytes : out[i - n_in].bytes);
  }
  return same || build_io(in, out);
}

// kSlots launchable forms of: copies in -> the captured graph -> copies out.
bool GpuGraph::build_io(const std::vector<DeviceCopy>& in, const std::vector<DeviceCopy>& out) {
  drop_io();
  if (++io_builds > 2) return false;
  const size_t n = in.size() + out.size();
  uint64_t max_in = 0, max_out = 0;
  for (const DeviceCopy& c : in) max_in = std::max<uint64_t>(max_in, c.bytes), io_bytes.push_back(c.bytes);
  for (const DeviceCopy& c : out) max_out = std::max<uint64_t>(max_out, c.bytes), io_bytes.push_back(c.bytes);
  n_in = in.size();
  hipError_t e = hipSuccess;
  if (n) {
    e = hipHostMalloc(&table, kSlots * n * sizeof(GraphCopy), hipHostMallocMapped);
    if (e == hipSuccess) e = hipHostGetDevicePointer(reinterpret_cast<void**>(&table_dev), table, 0);
  }
  for (int k = 0; k < kSlots && e == hipSuccess; ++k) {
    hipGraph_t w = nullptr;
    hipGraphNode_t before = nullptr, body = nullptr, after = nullptr;
    e = hipGraphCreate(&w, 0);
    if (e == hipSuccess && !in.empty()) {
      e = add_graph_copies(w, nullptr, 0, table_dev + k * n, int(in.size()), max_in, &before);
    }
    if (e == hipSuccess) e = hipGraphAddChildGraphNode(&body, w, before ? &before : nullptr, before ? 1 : 0, graph);
    if (e == hipSuccess && !out.empty()) {
      e = add_graph_copies(w, &body, 1, table_dev + k * n + in.size(), int(out.size()), max_out, &after);
    }
    if (e == hipSuccess) e = hipGraphInstantiateWithFlags(&slots[k].exec, w, 0);
    if (e == hipSuccess) e = hipEventCreateWithFlags(&slots[k].done, hipEventDisableTiming);
    if (w) (void)hipGraphDestroy(w);
  }
  if (e != hipSuccess) {
    (void)hipGetLastError();
    drop_io();
    return false;
  }
  return true;
}

void GpuGraph::launch_io(hipStream_t stream, const std::vector<DeviceCopy>& in, const std::vector<DeviceCopy>& out) {
  const int k = next_slot;
  next_slot = (k + 1) % kSlots;
  IoSlot& s = slots[k];
  if (s.launched) PF_HIP_CHECK(hipEventSynchronize(s.done));  // its launch has read its row
  GraphCopy* row = table + k * io_bytes.size();
  for (const DeviceCopy& c : in) *row++ = {c.dst, c.src, c.bytes};
  for (const DeviceCopy& c : out) *row++ = {c.dst, c.src, c.bytes};
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the row is written before the launch
  PF_HIP_CHECK(hipGraphLaunch(s.exec, stream));
  PF_HIP_CHECK(hipEventRecord(s.done, stream));
  s.launched = true;
  last = s.done;
  last_stream = stream;
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
  // The previous replay, from any thread: on another stream, waited for.
  if (g.last && g.last_stream != ctx.stream) PF_HIP_CHECK(hipStreamWaitEvent(ctx.stream, g.last, 0));
  // Without range checks nothing waits between the launch and the copies
  // out: they run as nodes of the graph, and the replay makes one call.
  if (g.checks.empty() && g.io_ready(in, out)) {
    g.launch_io(ctx.stream, in, out);
    return true;
  }
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
  g.last = g.done;
  g.done_stream = g.last_stream = ctx.stream;
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
