// DNN library wrapper, the shared half (see dnn.h): handles, problem keys,
// batch chunks, the channels-last path and the API. The library calls are
// in dnn_cudnn.cc (NVIDIA) and dnn_miopen.cc (AMD), behind dnn_vendor.h.
#include "backend/rocm/dnn.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>

#include "backend/rocm/dnn_vendor.h"
#include "backend/rocm/gpu/libs.h"
#include "backend/rocm/gpu/platform.h"
#include "pyflame/backend/rocm.h"
#include "pyflame/errors.h"
#include "runtime/settings.h"

namespace pyflame::backend::rocm::dnn {

// ------------------------------------------------------------------ handles

namespace detail {

// One handle per context, bound to its stream at creation and kept in the
// context (process lifetime, like it): found without a lock once made.
DnnHandle& handle_for(DeviceContext& ctx) {
  if (DnnHandle* h = ctx.dnn.load(std::memory_order_acquire)) return *h;
  static std::mutex mu;  // creation only
  std::lock_guard lk(mu);
  if (!ctx.dnn.load()) {
    DeviceGuard g(ctx.device);
    auto h = std::make_unique<DnnHandle>();
    h->h = gpu::create_dnn_handle(ctx.stream);
    ctx.dnn.store(h.release(), std::memory_order_release);
  }
  return *ctx.dnn.load();
}

}  // namespace detail

gpu::dnn_handle_t handle(DeviceContext& ctx) { return detail::handle_for(ctx).h; }

namespace detail {

GraphCounters& graph_counters() {
  static GraphCounters* c = new GraphCounters;  // process lifetime, like the plans it counts
  return *c;
}

namespace {

const std::string& arch_of(int device) {
  // Found without a lock once known (process lifetime).
  static std::atomic<const std::string*> archs[kMaxDevices];
  static std::mutex mu;
  if (const std::string* a = archs[device].load(std::memory_order_acquire)) return *a;
  std::lock_guard lk(mu);
  if (!archs[device].load()) archs[device].store(new std::string(gpu::device_arch(device)), std::memory_order_release);
  return *archs[device].load();
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

int to_int(int64_t v, const char* fn) {
  if (v > INT_MAX || v < 0) {
    throw ValueError(errmsg(fn, "a size of " + std::to_string(v) + " exceeds the DNN library's 32-bit range"));
  }
  return static_cast<int>(v);
}

}  // namespace

// ------------------------------------------------------------------ shapes

std::vector<int> ints(const std::vector<int64_t>& v, const char* fn) {
  std::vector<int> out;
  for (int64_t e : v) out.push_back(to_int(e, fn));
  return out;
}

std::vector<int> packed_strides(const std::vector<int>& dims) {
  std::vector<int> st(dims.size(), 1);
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * std::max(dims[d + 1], 1);
  return st;
}

// Memory order (N, *spatial, C): the channel stride is 1, the last spatial
// axis steps over C, each other axis over everything inside it.
std::vector<int> channels_last_strides(const std::vector<int>& dims) {
  const int n = static_cast<int>(dims.size());
  std::vector<int> st(n, 1);
  int inner = std::max(dims[1], 1);  // elements per step of the next axis out
  for (int d = n - 1; d >= 2; --d) {
    st[d] = inner;
    inner *= std::max(dims[d], 1);
  }
  st[0] = inner;
  return st;
}

Lifted lift(const ConvProblem& p, const char* fn) {
  Lifted L;
  L.x = ints(p.x, fn);
  L.w = ints(p.w, fn);
  L.y = ints(p.y, fn);
  L.pad = ints(p.padding, fn);
  L.stride = ints(p.stride, fn);
  L.dil = ints(p.dilation, fn);
  if (L.x.size() == 3) {  // (N, C, L) as (N, C, 1, L); channels-last (N, L, C) is (N, 1, L, C) as well
    L.x.insert(L.x.begin() + 2, 1);
    L.w.insert(L.w.begin() + 2, 1);
    L.y.insert(L.y.begin() + 2, 1);
    L.pad.insert(L.pad.begin(), 0);
    L.stride.insert(L.stride.begin(), 1);
    L.dil.insert(L.dil.begin(), 1);
  }
  L.nsp = static_cast<int>(L.x.size()) - 2;
  L.channels_last = p.channels_last;
  return L;
}

std::string conv_key(const char* op, const Lifted& L, Dtype dt, int64_t groups, int device) {
  std::ostringstream k;
  k << op << '|' << library_tag() << '|' << arch_of(device) << '|' << dtype_name(dt)
    << "|tf32=" << (dt == Dtype::Float32 && allow_tf32() ? 1 : 0) << "|x=" << join(L.x) << "|w=" << join(L.w)
    << "|y=" << join(L.y) << "|p=" << join(L.pad) << "|s=" << join(L.stride) << "|d=" << join(L.dil)
    << "|g=" << groups << "|layout=" << (L.channels_last ? "nhwc" : "nchw");
  return k.str();
}

std::shared_ptr<Buffer> search_workspace(DeviceContext& ctx, size_t& bytes) {
  bytes = std::min(bytes, kMaxWorkspace);
  while (bytes > 0) {
    try {
      return temp_buffer(ctx, bytes);
    } catch (const OutOfMemoryError&) {
      bytes /= 4;
      if (bytes < (size_t(1) << 20)) bytes = 0;
    }
  }
  return nullptr;
}

std::shared_ptr<Buffer> run_workspace(DeviceContext& ctx, size_t bytes) {
  return bytes ? temp_buffer(ctx, bytes) : nullptr;
}

}  // namespace detail

namespace {

using namespace detail;

// ------------------------------------------------------------------ chunks

// Splits the batch so that every chunk's x and y stay within 32-bit element
// counts (the legacy DNN APIs index with int), calling f(n0, n) until it
// returns false; false then.
template <typename F>
bool for_batch_chunks(const ConvProblem& p, const char* fn, F&& f) {
  const int64_t N = p.x[0];
  const int64_t per = std::max(shape_size(p.x) / std::max<int64_t>(N, 1), shape_size(p.y) / std::max<int64_t>(N, 1));
  const int64_t max_n = per > 0 ? INT_MAX / per : N;
  if (max_n < 1) {
    throw ValueError(errmsg(fn, "one sample of " + std::to_string(per) +
                                    " elements exceeds the DNN library's 32-bit range"));
  }
  for (int64_t n0 = 0; n0 < N; n0 += max_n) {
    if (!f(n0, std::min(max_n, N - n0))) return false;
  }
  return true;
}

ConvProblem with_batch(const ConvProblem& p, int64_t n) {
  ConvProblem q = p;
  q.x[0] = n;
  q.y[0] = n;
  return q;
}

// Elements of one sample of x and of y (the chunk offsets; the same in
// either memory order).
int64_t per_sample(const Shape& s) { return shape_size(s) / std::max<int64_t>(s[0], 1); }

// The three directions over batch chunks, in p's memory order; false when a
// channels-last problem is rejected.
bool forward_chunks(DeviceContext& ctx, const ConvProblem& p, const void* x, const void* w, void* y) {
  const size_t es = itemsize(p.dtype);
  const int64_t xs = per_sample(p.x), ys = per_sample(p.y);
  return for_batch_chunks(p, "conv", [&](int64_t n0, int64_t n) {
    return conv_forward_chunk(ctx, with_batch(p, n), static_cast<const char*>(x) + n0 * xs * es, w,
                              static_cast<char*>(y) + n0 * ys * es);
  });
}

bool backward_data_chunks(DeviceContext& ctx, const ConvProblem& p, void* x, const void* w, const void* y) {
  const size_t es = itemsize(p.dtype);
  const int64_t xs = per_sample(p.x), ys = per_sample(p.y);
  return for_batch_chunks(p, "conv_transpose", [&](int64_t n0, int64_t n) {
    return conv_backward_data_chunk(ctx, with_batch(p, n), static_cast<char*>(x) + n0 * xs * es, w,
                                    static_cast<const char*>(y) + n0 * ys * es);
  });
}

bool backward_weights_chunks(DeviceContext& ctx, const ConvProblem& p, const void* x, void* w, const void* y) {
  const size_t es = itemsize(p.dtype);
  const int64_t xs = per_sample(p.x), ys = per_sample(p.y);
  std::shared_ptr<Buffer> part;  // later batch chunks' gradients, added into w
  return for_batch_chunks(p, "conv_weight_grad", [&](int64_t n0, int64_t n) {
    const void* xc = static_cast<const char*>(x) + n0 * xs * es;
    const void* yc = static_cast<const char*>(y) + n0 * ys * es;
    if (n0 == 0) return conv_backward_weights_chunk(ctx, with_batch(p, n), xc, w, yc);
    if (!part) part = temp_buffer(ctx, shape_size(p.w) * es);
    if (!conv_backward_weights_chunk(ctx, with_batch(p, n), xc, part->ptr, yc)) return false;
    accumulate(ctx, p.dtype, ints(p.w, "conv_weight_grad"), w, part->ptr);
    return true;
  });
}

// ------------------------------------------------------------------ layout

// Whether a problem given row-major runs channels-last (see dnn.h):
// 16-bit floats with 1 or 2 spatial axes and per-group channel counts the
// tensor-core kernels take; everything floating under PYFLAME_CONV_LAYOUT=nhwc.
bool use_channels_last(const ConvProblem& p) {
  if (p.channels_last || p.x.size() > 4) return false;
  switch (settings::conv_layout()) {
    case settings::ConvLayout::Nchw: return false;
    case settings::ConvLayout::Nhwc: return true;
    case settings::ConvLayout::Auto: break;
  }
  if (p.dtype != Dtype::Float16 && p.dtype != Dtype::BFloat16) return false;
  const int64_t g = std::max<int64_t>(p.groups, 1);
  return (p.x[1] / g) % 8 == 0 && (p.w[0] / g) % 8 == 0;
}

// A dense (B, C, *spatial) array and its channels-last copy.
void to_channels_last(DeviceContext& ctx, const ConvProblem& p, const Shape& s, const void* src, void* dst) {
  transpose_batched(ctx, itemsize(p.dtype), s[0], s[1], shape_size(s) / std::max<int64_t>(s[0] * s[1], 1), src, dst);
}

void from_channels_last(DeviceContext& ctx, const ConvProblem& p, const Shape& s, const void* src, void* dst) {
  transpose_batched(ctx, itemsize(p.dtype), s[0], shape_size(s) / std::max<int64_t>(s[0] * s[1], 1), s[1], src, dst);
}

// Scratch for one operand of the channels-last path.
std::shared_ptr<Buffer> scratch(DeviceContext& ctx, const ConvProblem& p, const Shape& s) {
  return temp_buffer(ctx, std::max<size_t>(shape_size(s) * itemsize(p.dtype), 1));
}

ConvProblem with_layout(const ConvProblem& p, bool channels_last) {
  ConvProblem q = p;
  q.channels_last = channels_last;
  q.x_channels_last = channels_last;
  return q;
}

// A row-major problem for the library's own layout handling: cuDNN's graph
// API reads and writes the row-major operands itself, converting inside its
// engines (as PyTorch runs them) in less time than the transposes around the
// channels-last problem. Tried first where the library has it.
ConvProblem as_given(const ConvProblem& p) {
  ConvProblem q = with_layout(p, false);
  q.library_layout_only = true;
  return q;
}

// x as the library call reads it: converted into `buf` unless already in
// the wanted memory order.
const void* x_in(DeviceContext& ctx, const ConvProblem& p, const void* x, bool channels_last,
                 std::shared_ptr<Buffer>& buf) {
  if (p.x_channels_last == channels_last) return x;
  buf = scratch(ctx, p, p.x);
  if (channels_last) {
    to_channels_last(ctx, p, p.x, x, buf->ptr);
  } else {
    from_channels_last(ctx, p, p.x, x, buf->ptr);
  }
  return buf->ptr;
}

// The channels-last runs of the three directions: inputs converted into
// scratch (x only when not channels-last already), the output converted
// back to row-major. False (the output untouched) when the library rejects
// the problem.
bool forward_channels_last(DeviceContext& ctx, const ConvProblem& p, const void* x, const void* w, void* y) {
  std::shared_ptr<Buffer> xt;
  const void* xc = x_in(ctx, p, x, true, xt);
  auto wt = scratch(ctx, p, p.w), yt = scratch(ctx, p, p.y);
  to_channels_last(ctx, p, p.w, w, wt->ptr);
  if (!forward_chunks(ctx, with_layout(p, true), xc, wt->ptr, yt->ptr)) return false;
  from_channels_last(ctx, p, p.y, yt->ptr, y);
  return true;
}

bool backward_data_channels_last(DeviceContext& ctx, const ConvProblem& p, void* x, const void* w, const void* y) {
  auto xt = scratch(ctx, p, p.x), wt = scratch(ctx, p, p.w), yt = scratch(ctx, p, p.y);
  to_channels_last(ctx, p, p.y, y, yt->ptr);
  to_channels_last(ctx, p, p.w, w, wt->ptr);
  if (!backward_data_chunks(ctx, with_layout(p, true), xt->ptr, wt->ptr, yt->ptr)) return false;
  from_channels_last(ctx, p, p.x, xt->ptr, x);
  return true;
}

bool backward_weights_channels_last(DeviceContext& ctx, const ConvProblem& p, const void* x, void* w,
                                    const void* y) {
  std::shared_ptr<Buffer> xt;
  const void* xc = x_in(ctx, p, x, true, xt);
  auto wt = scratch(ctx, p, p.w), yt = scratch(ctx, p, p.y);
  to_channels_last(ctx, p, p.y, y, yt->ptr);
  if (!backward_weights_chunks(ctx, with_layout(p, true), xc, wt->ptr, yt->ptr)) return false;
  from_channels_last(ctx, p, p.w, wt->ptr, w);
  return true;
}

// The row-major layout: a rejection is an error here (only channels-last
// problems are ever rejected).
void must(bool ran, const char* fn) {
  if (!ran) throw RuntimeError(errmsg(fn, "the DNN library rejected a channels-last convolution"));
}

}  // namespace

// ================================================================== API

void conv_forward(DeviceContext& ctx, const ConvProblem& p, const void* x, const void* w, void* y) {
  DeviceGuard g(ctx.device);
  if (use_channels_last(p)) {
    if (!p.x_channels_last && forward_chunks(ctx, as_given(p), x, w, y)) return;
    if (forward_channels_last(ctx, p, x, w, y)) return;
  }
  std::shared_ptr<Buffer> xt;
  const void* xr = x_in(ctx, p, x, false, xt);
  must(forward_chunks(ctx, with_layout(p, false), xr, w, y), "conv");
}

void conv_backward_data(DeviceContext& ctx, const ConvProblem& p, void* x, const void* w, const void* y) {
  DeviceGuard g(ctx.device);
  if (p.x_channels_last) throw RuntimeError(errmsg("conv_transpose", "internal: the output must be row-major"));
  if (use_channels_last(p)) {
    if (backward_data_chunks(ctx, as_given(p), x, w, y)) return;
    if (backward_data_channels_last(ctx, p, x, w, y)) return;
  }
  must(backward_data_chunks(ctx, p, x, w, y), "conv_transpose");
}

void conv_backward_weights(DeviceContext& ctx, const ConvProblem& p, const void* x, void* w, const void* y) {
  DeviceGuard g(ctx.device);
  if (use_channels_last(p)) {
    if (!p.x_channels_last && backward_weights_chunks(ctx, as_given(p), x, w, y)) return;
    if (backward_weights_channels_last(ctx, p, x, w, y)) return;
  }
  std::shared_ptr<Buffer> xt;
  const void* xr = x_in(ctx, p, x, false, xt);
  must(backward_weights_chunks(ctx, with_layout(p, false), xr, w, y), "conv_weight_grad");
}

namespace {
// A pooling problem as the library's int dimensions (1-d as 2-d with a unit
// height); false when the library does not express it exactly.
bool pool_dims(const Shape& x_shape, const Shape& y_shape, const std::vector<int64_t>& kernel,
               const std::vector<int64_t>& stride, const std::vector<int64_t>& padding, std::vector<int>& xd,
               std::vector<int>& yd, std::vector<int>& k, std::vector<int>& s, std::vector<int>& p) {
  const int nsp = static_cast<int>(kernel.size());
  if (nsp < 1 || nsp > 3 || shape_size(x_shape) > INT_MAX || shape_size(y_shape) > INT_MAX) return false;
  for (int d = 0; d < nsp; ++d) {
    // The library's output size is the floor rule's; the op's may differ
    // (ceil_mode), and then the caller's kernel runs.
    const int64_t in = x_shape[2 + d], out = y_shape[2 + d];
    if (in + 2 * padding[d] < kernel[d] || (in + 2 * padding[d] - kernel[d]) / stride[d] + 1 != out) return false;
    if (padding[d] >= kernel[d]) return false;
  }
  for (int64_t v : x_shape) xd.push_back(static_cast<int>(v));
  for (int64_t v : y_shape) yd.push_back(static_cast<int>(v));
  for (int d = 0; d < nsp; ++d) {
    k.push_back(static_cast<int>(kernel[d]));
    s.push_back(static_cast<int>(stride[d]));
    p.push_back(static_cast<int>(padding[d]));
  }
  if (nsp == 1) {  // as 2-d with a unit height
    xd.insert(xd.begin() + 2, 1);
    yd.insert(yd.begin() + 2, 1);
    k.insert(k.begin(), 1);
    s.insert(s.begin(), 1);
    p.insert(p.begin(), 0);
  }
  return true;
}
}  // namespace

bool pool_forward(DeviceContext& ctx, Dtype dtype, PoolMode mode, const Shape& x_shape, const void* x,
                  const Shape& y_shape, void* y, const std::vector<int64_t>& kernel,
                  const std::vector<int64_t>& stride, const std::vector<int64_t>& padding) {
  std::vector<int> xd, yd, k, s, p;
  if (!pool_dims(x_shape, y_shape, kernel, stride, padding, xd, yd, k, s, p)) return false;
  DeviceGuard g(ctx.device);
  return detail::pool_forward_impl(ctx, dtype, mode, xd, x, yd, y, k, s, p);
}

bool pool_backward(DeviceContext& ctx, Dtype dtype, PoolMode mode, const Shape& x_shape, const void* x, void* dx,
                   const Shape& y_shape, const void* y, const void* dy, const std::vector<int64_t>& kernel,
                   const std::vector<int64_t>& stride, const std::vector<int64_t>& padding) {
  if (mode == PoolMode::Max) return false;  // see dnn.h
  std::vector<int> xd, yd, k, s, p;
  if (!pool_dims(x_shape, y_shape, kernel, stride, padding, xd, yd, k, s, p)) return false;
  DeviceGuard g(ctx.device);
  return detail::pool_backward_impl(ctx, dtype, mode, xd, x, dx, yd, y, dy, k, s, p);
}

bool batch_norm_inference(DeviceContext& ctx, Dtype dtype, const Shape& x_shape, const void* x, void* y,
                          const float* scale, const float* bias, const float* mean, const float* var, double eps) {
  // Spatial batch norm only sees channels: (N, C, S, 1) for any rank.
  const int64_t N = x_shape[0], C = x_shape[1], S = shape_size(x_shape) / std::max<int64_t>(N * C, 1);
  if (shape_size(x_shape) > INT_MAX) return false;
  const std::vector<int> xd{static_cast<int>(N), static_cast<int>(C), static_cast<int>(S), 1};
  DeviceGuard g(ctx.device);
  return detail::batch_norm_inference_impl(ctx, dtype, xd, x, y, scale, bias, mean, var, eps);
}

}  // namespace pyflame::backend::rocm::dnn

namespace pyflame::backend::rocm {

DnnGraphStats dnn_graph_stats() {
  dnn::detail::GraphCounters& c = dnn::detail::graph_counters();
  DnnGraphStats s;
#if !defined(__HIP_PLATFORM_AMD__)
  s.enabled = settings::cudnn_graph();
#endif
  s.plans_built = c.built.load();
  s.plans_failed = c.failed.load();
  s.runs = c.runs.load();
  std::lock_guard lk(c.mu);
  s.last_failure = c.last_failure;
  return s;
}

}  // namespace pyflame::backend::rocm
