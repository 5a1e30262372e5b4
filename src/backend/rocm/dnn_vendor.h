// Between the shared half of the DNN wrapper (dnn.cc: handles, problem
// keys, batch chunks, the channels-last path, the API of dnn.h) and its
// vendor halves (dnn_cudnn.cc with dnn_cudnn_graph.cc, dnn_miopen.cc; each
// compiles to nothing on the other platform). Library enums stay in the
// vendor files; the cuDNN section below is what the two cuDNN files share.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend/rocm/dnn.h"
#include "backend/rocm/gpu/libs.h"

namespace pyflame::backend::rocm {
// Stream-ordered scratch memory (kernels/elementwise.hip).
std::shared_ptr<Buffer> temp_buffer(DeviceContext& ctx, size_t bytes);
}  // namespace pyflame::backend::rocm

namespace pyflame::backend::rocm::dnn {

struct DnnHandle {
  gpu::dnn_handle_t h = nullptr;
  std::mutex mu;  // a library handle serves one thread at a time
};

namespace detail {

// ---- shared (dnn.cc)

DnnHandle& handle_for(DeviceContext& ctx);

// The handle's lock for a call on ctx: none on a multi_stream bundle or a
// capture context (one thread's while taken, like its BLAS handle), the
// handle's mutex on the shared context (every thread's with multi_stream off).
inline std::unique_lock<std::mutex> lock_handle(const DeviceContext& ctx, DnnHandle& H) {
  return ctx.bundle ? std::unique_lock<std::mutex>() : std::unique_lock<std::mutex>(H.mu);
}

constexpr size_t kMaxWorkspace = size_t(1) << 30;  // the most a convolution may ask for

// The tuning-cache algorithm of a channels-last problem the library
// rejected: it runs NCHW.
constexpr uint64_t kRejected = ~uint64_t(0);

std::vector<int> ints(const std::vector<int64_t>& v, const char* fn);
// Strides of a dense (N, C, *spatial) array in row-major or channels-last
// memory order (dims in the logical order either way).
std::vector<int> packed_strides(const std::vector<int>& dims);
std::vector<int> channels_last_strides(const std::vector<int>& dims);

// A convolution problem as the library's int dimensions; 1-d problems as
// 2-d: a unit axis before the length, with unit geometry.
struct Lifted {
  std::vector<int> x, w, y, pad, stride, dil;
  int nsp = 0;
  bool channels_last = false;
  // The strides of x, y and w in the problem's memory order.
  std::vector<int> strides(const std::vector<int>& dims) const {
    return channels_last ? channels_last_strides(dims) : packed_strides(dims);
  }
};

Lifted lift(const ConvProblem& p, const char* fn);

// The tuning-cache key of a convolution problem (the layout included).
std::string conv_key(const char* op, const Lifted& L, Dtype dt, int64_t groups, int device);

// Scratch for a search: as much as asked (up to kMaxWorkspace), less when
// memory is short (bytes is updated).
std::shared_ptr<Buffer> search_workspace(DeviceContext& ctx, size_t& bytes);
std::shared_ptr<Buffer> run_workspace(DeviceContext& ctx, size_t bytes);
inline void* ptr_of(const std::shared_ptr<Buffer>& b) { return b ? b->ptr : nullptr; }

// ---- per vendor (dnn_cudnn.cc / dnn_miopen.cc)

// The library and its version, for the tuning-cache key.
const std::string& library_tag();

// One batch chunk (within the library's 32-bit element counts) of each
// convolution direction, the algorithm from the tuning cache or a search.
// A channels-last problem the library rejects returns false having written
// nothing the caller keeps (and is cached as kRejected); every other
// failure throws.
bool conv_forward_chunk(DeviceContext& ctx, const ConvProblem& p, const void* x, const void* w, void* y);
bool conv_backward_data_chunk(DeviceContext& ctx, const ConvProblem& p, void* x, const void* w, const void* y);
bool conv_backward_weights_chunk(DeviceContext& ctx, const ConvProblem& p, const void* x, void* w, const void* y);

// Counts of the cuDNN graph path (dnn_cudnn_graph.cc; zeros elsewhere),
// for dnn_graph_stats (pyflame/backend/rocm.h).
struct GraphCounters {
  std::atomic<uint64_t> built{0}, failed{0}, runs{0};
  std::mutex mu;
  std::string last_failure;  // why the latest problem without a plan has none
  void note_failure(std::string why) {
    failed.fetch_add(1);
    std::lock_guard lk(mu);
    last_failure = std::move(why);
  }
};
GraphCounters& graph_counters();

#if !defined(__HIP_PLATFORM_AMD__)
// ---- cuDNN only (dnn_cudnn.cc, dnn_cudnn_graph.cc)

cudnnDataType_t dnn_type(Dtype t);

enum class ConvDir { Forward, BackwardData, BackwardWeights };

// One chunk of a channels-last float16/bfloat16 convolution through cuDNN's
// graph API (its operands as in conv_*_chunk; the output is y, x or w by
// direction), with the plan of this problem and handle built on first use.
// False, having launched nothing, when cuDNN builds no plan for it: the
// caller runs the legacy API. A plan that fails to run throws.
bool conv_graph_chunk(DeviceContext& ctx, ConvDir dir, const Lifted& L, Dtype dt, int64_t groups, const void* x,
                      const void* w, const void* y);
#endif

// dst += src for two dense arrays of `dims` (the same memory order).
void accumulate(DeviceContext& ctx, Dtype dtype, const std::vector<int>& dims, void* dst, const void* src);

bool pool_forward_impl(DeviceContext& ctx, Dtype dtype, PoolMode mode, const std::vector<int>& xd, const void* x,
                       const std::vector<int>& yd, void* y, const std::vector<int>& k, const std::vector<int>& s,
                       const std::vector<int>& p);
bool pool_backward_impl(DeviceContext& ctx, Dtype dtype, PoolMode mode, const std::vector<int>& xd, const void* x,
                        void* dx, const std::vector<int>& yd, const void* y, const void* dy,
                        const std::vector<int>& k, const std::vector<int>& s, const std::vector<int>& p);
bool batch_norm_inference_impl(DeviceContext& ctx, Dtype dtype, const std::vector<int>& xd, const void* x, void* y,
                               const float* scale, const float* bias, const float* mean, const float* var,
                               double eps);

}  // namespace detail
}  // namespace pyflame::backend::rocm::dnn

// In a vendor's conv_chunk: evaluate a library call once; on failure throw
// naming it, unless the problem is channels-last and the vendor's
// soft_failure(status) says the library rejects it: then `return rejected`
// (an expression: cache the rejection, give false).
#define PF_DNN_TRY(call, channels_last, rejected)                                                     \
  do {                                                                                                \
    const ::pyflame::gpu::dnn_status_t pf_dnn_st_ = (call);                                           \
    if (pf_dnn_st_ != ::pyflame::gpu::kDnnSuccess) {                                                  \
      if ((channels_last) && soft_failure(pf_dnn_st_)) return (rejected);                             \
      ::pyflame::gpu::detail::throw_lib_error(::pyflame::gpu::dnn_status_string(pf_dnn_st_),          \
                                              static_cast<int>(pf_dnn_st_), #call, __FILE__, __LINE__); \
    }                                                                                                 \
  } while (0)
