// The seam between the core (tensors, the eval loop, allocation) and the
// device backends: the core includes this header, never a backend's. The
// GPU backend (backend/rocm) implements it, or backend/no_gpu in a build
// without one; the CPU backend implements the host copy.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pyflame/tensor.h"

namespace pyflame::runtime {

// One evaluation's GPU state on this thread (docs/design/eval_context.md).
// The eval loop holds one for the length of run(): while it lives, the
// kernels' context(device) resolves each device once (with multi_stream on,
// a bundle of this evaluation's own) and then reads it without a lock;
// range checks made by kernels wait for finish(). An evaluation nested in
// another (a custom backward evaluating inside backward()) shares the
// outer one's context.
class GpuEvaluation {
 public:
  GpuEvaluation();
  ~GpuEvaluation();  // after an error: drains the streams, drops the checks
  // Waits for what this evaluation queued where it has to (multi_stream
  // bundles, devices with pending checks) and raises the first failed
  // check's error.
  void finish();
  // How many range checks the kernels of this evaluation have made so far
  // (the eval loop notes which nodes rest on one).
  size_t checks_made() const;
  GpuEvaluation(const GpuEvaluation&) = delete;
  GpuEvaluation& operator=(const GpuEvaluation&) = delete;

 private:
  bool owner_ = false;
  bool finished_ = false;
};

// Device memory for a node on GPU `device`, on the current evaluation's
// stream for that device.
std::shared_ptr<Buffer> allocate_gpu(int device, size_t bytes);

// ---- graph replay (docs/design/replay.md; backend/rocm/graph.cc) ----

// A captured GPU graph, its private memory pool and stream context.
class GpuGraph;

// Captures an evaluation on GPU `device` as a graph: `run` is called twice
// on a private context (its own stream, handles and memory pool): once to
// warm up (kernels compiled, handles made, memory cached in the pool), then
// under stream capture (thread-local mode: other threads go on). Null if it
// cannot be captured, with the reason in `why`. Call outside an evaluation.
std::shared_ptr<GpuGraph> gpu_graph_capture(int device, const std::function<void()>& run,
                                            std::string& why);
// A copy between device buffers of one device.
struct DeviceCopy {
  void* dst;
  const void* src;
  size_t bytes;
};
// Inside a GpuEvaluation: on this evaluation's stream of the graph's device,
// after the graph's previous replay (on any stream) has finished, copies
// `in` (new inputs into the graph's buffers), launches the graph and copies
// `out` (results out of its buffers). False, doing nothing, when the
// allocator released cached memory since the capture (clear_pool,
// out-of-memory recovery): the graph's memory may be gone, so it is void.
bool gpu_graph_replay(GpuGraph& graph, const std::vector<DeviceCopy>& in,
                      const std::vector<DeviceCopy>& out);
// Inside a GpuEvaluation: the copies, on this evaluation's stream of `device`.
void gpu_copy(int device, const std::vector<DeviceCopy>& copies);

// Copies a GPU tensor (row-major, evaluated) into host memory at `dst`
// for a DownloadTo node: dst holds the values when the evaluation has
// finished (with multi_stream, the bytes leave the pinned block after the
// evaluation's one wait for its stream), not when this returns.
void download_gpu(const Tensor& src, void* dst);

// Copies a CPU tensor (any layout, evaluated) row-major into `dst`.
void copy_host_contiguous(const Tensor& src, void* dst);

}  // namespace pyflame::runtime
