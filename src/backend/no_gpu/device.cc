// Device management for a build without a GPU backend: no devices, and a
// clear RuntimeError wherever one is required.
#include "pyflame/backend/rocm.h"
#include "pyflame/errors.h"
#include "runtime/backend.h"

namespace pyflame::backend::rocm {

namespace {
[[noreturn]] void unavailable(const char* fn) {
  throw RuntimeError(errmsg(fn, "ROCm is not available: this build has no GPU backend"));
}
}  // namespace

bool compiled() { return false; }
const char* platform() { return "none"; }
bool is_available() { return false; }
int get_device_count() { return 0; }
int get_current_device() { return -1; }
void set_device(int) { unavailable("rocm_set_device"); }
void synchronize() { unavailable("rocm_synchronize"); }
DeviceInfo get_device_info(int) { unavailable("rocm_get_device_info"); }
std::shared_ptr<Buffer> allocate_buffer(int, size_t) { unavailable("allocate"); }
void copy_to_host(const Tensor&, void*) { unavailable("to"); }
int dlpack_device_type() { return 0; }
uintptr_t stream_handle(int) { unavailable("from_dlpack"); }
void make_stream_wait(int, uintptr_t) { unavailable("__dlpack__"); }
void synchronize_streams(int) { unavailable("from_dlpack"); }
MemoryStats memory_stats(int) { unavailable("get_memory_manager"); }
void reset_memory_stats(int) { unavailable("get_memory_manager"); }
void clear_memory_pool(int) { unavailable("get_memory_manager"); }
void memory_info(int, size_t*, size_t*) { unavailable("get_memory_manager"); }
void pinned_pool_warmup(const std::vector<size_t>&) { unavailable("get_pinned_pool"); }
void pinned_pool_clear() { unavailable("get_pinned_pool"); }
size_t pinned_pool_cached_bytes() { unavailable("get_pinned_pool"); }
void warmup_memory_pool(int, const std::string&) { unavailable("warmup_memory_pool"); }
bool allow_tf32() { return false; }
DnnGraphStats dnn_graph_stats() { return {}; }
// Without a GPU there are no streams: the flag is kept and changes nothing.
namespace {
bool g_multi_stream = false;
}
bool multi_stream() { return g_multi_stream; }
void set_multi_stream(bool on) { g_multi_stream = on; }
void set_allow_tf32(bool) { unavailable("set_allow_tf32"); }

}  // namespace pyflame::backend::rocm

// The runtime seam without a GPU: no device state, nothing to wait for.
namespace pyflame::runtime {
GpuEvaluation::GpuEvaluation() = default;
GpuEvaluation::~GpuEvaluation() = default;
void GpuEvaluation::finish() {}
size_t GpuEvaluation::checks_made() const { return 0; }
void download_gpu(const Tensor&, void*) {
  throw RuntimeError(errmsg("to", "ROCm is not available: this build has no GPU backend"));
}
std::shared_ptr<Buffer> allocate_gpu(int, size_t) {
  throw RuntimeError(errmsg("allocate", "ROCm is not available: this build has no GPU backend"));
}
class GpuGraph {};
std::shared_ptr<GpuGraph> gpu_graph_capture(int, const std::function<void()>&, std::string& why) {
  why = "this build has no GPU backend";
  return nullptr;
}
bool gpu_graph_replay(GpuGraph&, const std::vector<DeviceCopy>&, const std::vector<DeviceCopy>&) {
  return false;
}
void gpu_copy(int, const std::vector<DeviceCopy>&) {
  throw RuntimeError(errmsg("compile", "ROCm is not available: this build has no GPU backend"));
}
}  // namespace pyflame::runtime
