// GPU device management (spec: pyflame::backend::rocm). In a build without a
// GPU backend these report no devices and raise RuntimeError where a device
// is required.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pyflame/tensor.h"

namespace pyflame::backend::rocm {

struct DeviceInfo {
  int device_id = 0;
  std::string name;
  std::string architecture;  // "gfx90a" on AMD, "sm_90" on NVIDIA
  std::string platform;      // "amd" or "nvidia"
  size_t total_memory = 0;
  size_t free_memory = 0;
  int compute_units = 0;
  int wave_size = 0;
};

bool compiled();  // true when this build has a GPU backend
const char* platform();  // "amd", "nvidia" or "none"
bool is_available();
int get_device_count();
int get_current_device();  // -1 before any device is selected
void set_device(int device_id);
void synchronize();
DeviceInfo get_device_info(int device_id);

// Memory statistics of a device's caching allocator (spec: MemoryStats).
struct MemoryStats {
  size_t total_allocated = 0;  // bytes held by live allocations
  size_t peak_allocated = 0;
  size_t total_allocations = 0;
  size_t total_deallocations = 0;
  size_t cache_hits = 0;
  size_t cache_misses = 0;
  size_t cached_bytes = 0;  // freed blocks kept for reuse
};

// Platform-neutral entry points to the memory manager and pinned pool
// (backend/rocm/memory.h holds the full classes).
MemoryStats memory_stats(int device);
void reset_memory_stats(int device);
void clear_memory_pool(int device);
void memory_info(int device, size_t* free_bytes, size_t* total_bytes);
void pinned_pool_warmup(const std::vector<size_t>& sizes);
void pinned_pool_clear();
size_t pinned_pool_cached_bytes();
// Pre-allocates typical activation sizes: model_size 'small', 'medium' or 'large'.
void warmup_memory_pool(int batch_size, const std::string& model_size);

// TF32 for float32 GEMMs (NVIDIA): off by default so results match the CPU.
bool allow_tf32();
void set_allow_tf32(bool on);

// Convolutions through cuDNN's graph API (NVIDIA; backend/rocm/dnn.h):
// whether the path is on (an NVIDIA build without PYFLAME_CUDNN_GRAPH=0),
// execution plans built, problems it built none for (they run through the
// legacy API), runs of a plan, and why the latest problem without a plan
// has none. Zeros (off) on AMD and without a GPU backend.
struct DnnGraphStats {
  bool enabled = false;
  uint64_t plans_built = 0;
  uint64_t plans_failed = 0;
  uint64_t runs = 0;
  std::string last_failure;
};
DnnGraphStats dnn_graph_stats();

// multi_stream (spec 000), off by default. Off: every evaluation on a device
// shares its one compute stream, BLAS handle and workspace. On: each
// evaluation takes a bundle of its own (compute stream, BLAS handle and
// workspace, DNN handles bound to that stream) from a per-device pool, so
// evaluations on different threads run concurrently without a shared lock.
// An evaluation's results are complete when it returns, so any thread or
// stream can read them.
bool multi_stream();
void set_multi_stream(bool on);

// Device memory for a graph node on GPU `device_id`.
std::shared_ptr<Buffer> allocate_buffer(int device_id, size_t bytes);

// Copies an evaluated GPU tensor (any layout) row-major into host memory,
// waiting only on the stream that produced it.
void copy_to_host(const Tensor& src, void* dst);

// DLPack interop (python/src/dlpack.cc). Streams cross the protocol as
// integers: a stream handle, or the protocol's 0/1/2 for the default streams,
// which are their handles' values on both platforms.
//
// The DLPack device type of this build's GPUs: kDLCUDA (2) on NVIDIA,
// kDLROCM (10) on AMD, 0 in a build without a GPU backend.
int dlpack_device_type();
// The stream PyFlame's next work on `device` from this thread runs on.
uintptr_t stream_handle(int device);
// Makes stream `consumer` wait for the work queued so far on `device`'s
// stream (an event recorded there, waited on by `consumer`).
void make_stream_wait(int device, uintptr_t consumer);
// Blocks until the work queued so far on `device` has finished: before
// memory PyFlame borrowed is handed back to its owner.
void synchronize_streams(int device);

}  // namespace pyflame::backend::rocm
