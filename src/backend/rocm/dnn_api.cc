// ROCmDNN (pyflame/backend/rocm/dnn.h): the spec's DNN wrapper over the
// backend's DNN layer (dnn.h) and its ops.
#include "pyflame/backend/rocm/dnn.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "backend/rocm/context.h"
#include "backend/rocm/dnn.h"
#include "backend/rocm/raw_ops.h"
#include "pyflame/errors.h"
#include "pyflame/ops.h"

namespace pyflame::backend::rocm {

namespace {

std::string dims_str(const std::vector<int64_t>& v) { return shape_str(v); }

void check_4d(const std::vector<int64_t>& s, const char* what, const char* fn) {
  if (s.size() != 4 || std::any_of(s.begin(), s.end(), [](int64_t d) { return d < 0; })) {
    throw ValueError(errmsg(fn, std::string(what) + " must be 4-d (N, C, H, W), got " + dims_str(s)));
  }
}

void check_float(Dtype d, const char* fn) {
  if (!is_floating(d)) {
    throw ValueError(errmsg(fn, std::string("dtype must be float32, float16 or bfloat16, not ") + dtype_name(d)));
  }
}

void check_pair(const std::vector<int>& v, const char* what, int min, const char* fn) {
  if (v.size() != 2 || v[0] < min || v[1] < min) {
    throw ValueError(errmsg(fn, std::string(what) + " must hold two values >= " + std::to_string(min)));
  }
}

std::vector<int64_t> wide(const std::vector<int>& v) { return {v.begin(), v.end()}; }

void check_output(const std::vector<int64_t>& got, const std::vector<int64_t>& want, const char* fn) {
  if (got != want) {
    throw ValueError(errmsg(fn, "output shape " + dims_str(got) + " does not match the expected " + dims_str(want)));
  }
}

}  // namespace

ConvParams ConvParams::Conv2D(int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w,
                              int groups) {
  return {{pad_h, pad_w}, {stride_h, stride_w}, {dilation_h, dilation_w}, groups};
}

PoolParams PoolParams::Pool2D(int kernel_h, int kernel_w, int pad_h, int pad_w, int stride_h, int stride_w) {
  return {{kernel_h, kernel_w}, {pad_h, pad_w}, {stride_h, stride_w}, false};
}

ROCmDNN::ROCmDNN() : device_(std::max(0, get_current_device())), caller_(nullptr) {
  caller_ = shared_context(device_).stream;
}

ROCmDNN::~ROCmDNN() = default;

void ROCmDNN::set_stream(hipStream_t stream) { caller_ = stream; }

gpu::dnn_handle_t ROCmDNN::handle() const {
  DeviceGuard g(device_);
  return dnn::handle(shared_context(device_));
}

size_t ROCmDNN::conv2d_forward_workspace_size(DType, const std::vector<int64_t>&, const std::vector<int64_t>&,
                                              const std::vector<int64_t>&, const ConvParams&) {
  return 0;  // the wrapper takes its workspace from the device's pool
}

void ROCmDNN::conv2d_forward(DType dtype, const std::vector<int64_t>& input_shape, const void* input,
                             const std::vector<int64_t>& weight_shape, const void* weight,
                             const std::vector<int64_t>& output_shape, void* output, const ConvParams& params,
                             void*, size_t) {
  const char* fn = "conv2d_forward";
  check_float(dtype, fn);
  check_4d(input_shape, "input", fn);
  check_4d(weight_shape, "weight", fn);
  check_4d(output_shape, "output", fn);
  check_pair(params.padding, "padding", 0, fn);
  check_pair(params.stride, "stride", 1, fn);
  check_pair(params.dilation, "dilation", 1, fn);
  const int64_t g = params.groups;
  if (g < 1 || input_shape[1] % g || weight_shape[0] % g || weight_shape[1] * g != input_shape[1]) {
    throw ValueError(errmsg(fn, "input " + dims_str(input_shape) + " and weight " + dims_str(weight_shape) +
                                    " do not match groups=" + std::to_string(g)));
  }
  std::vector<int64_t> want{input_shape[0], weight_shape[0], 0, 0};
  for (int i = 0; i < 2; ++i) {
    const int64_t span = int64_t(params.dilation[i]) * (weight_shape[2 + i] - 1) + 1;
    const int64_t padded = input_shape[2 + i] + 2 * int64_t(params.padding[i]);
    if (padded < span) throw ValueError(errmsg(fn, "the kernel is larger than the padded input"));
    want[2 + i] = (padded - span) / params.stride[i] + 1;
  }
  check_output(output_shape, want, fn);
  dnn::ConvProblem p{dtype, input_shape, weight_shape, output_shape, wide(params.stride), wide(params.padding),
                     wide(params.dilation), g};
  raw::Call call(caller_, fn);
  DeviceGuard guard(device_);
  dnn::conv_forward(shared_context(device_), p, input, weight, output);
  call.finish();
}

void ROCmDNN::pooling2d_forward(ir::OpType pool_type, DType dtype, const std::vector<int64_t>& input_shape,
                                const void* input, const std::vector<int64_t>& output_shape, void* output,
                                const PoolParams& params) {
  const char* fn = "pooling2d_forward";
  if (pool_type != ir::OpType::MaxPool && pool_type != ir::OpType::AvgPool) {
    throw ValueError(errmsg(fn, std::string("pool_type must be MaxPool or AvgPool, not ") +
                                    ir::op_type_name(pool_type)));
  }
  if (params.ceil_mode) throw ValueError(errmsg(fn, "ceil_mode is not supported here (use pyflame::max_pool2d)"));
  check_float(dtype, fn);
  check_4d(input_shape, "input", fn);
  check_4d(output_shape, "output", fn);
  check_pair(params.kernel_size, "kernel_size", 1, fn);
  check_pair(params.padding, "padding", 0, fn);
  check_pair(params.stride, "stride", 1, fn);
  std::vector<int64_t> want{input_shape[0], input_shape[1], 0, 0};
  for (int i = 0; i < 2; ++i) {
    const int64_t padded = input_shape[2 + i] + 2 * int64_t(params.padding[i]);
    if (padded < params.kernel_size[i]) throw ValueError(errmsg(fn, "the window is larger than the padded input"));
    want[2 + i] = (padded - params.kernel_size[i]) / params.stride[i] + 1;
  }
  check_output(output_shape, want, fn);
  const dnn::PoolMode mode = pool_type == ir::OpType::MaxPool ? dnn::PoolMode::Max : dnn::PoolMode::AvgIncludePad;
  raw::Call call(caller_, fn);
  DeviceGuard guard(device_);
  if (!dnn::pool_forward(shared_context(device_), dtype, mode, input_shape, input, output_shape, output,
                         wide(params.kernel_size), wide(params.stride), wide(params.padding))) {
    throw RuntimeError(errmsg(fn, "the DNN library cannot run this pooling problem"));
  }
  call.finish();
}

void ROCmDNN::batchnorm_forward_inference(DType dtype, const std::vector<int64_t>& shape, const void* input,
                                          void* output, const float* scale, const float* bias, const float* mean,
                                          const float* var, const BatchNormParams& params) {
  const char* fn = "batchnorm_forward_inference";
  if (params.training) throw ValueError(errmsg(fn, "training batch norm is pyflame::batch_norm, not this wrapper"));
  check_float(dtype, fn);
  if (shape.size() < 2) throw ValueError(errmsg(fn, "input must be (N, C, ...), got " + dims_str(shape)));
  raw::Call call(caller_, fn);
  DeviceGuard guard(device_);
  if (!dnn::batch_norm_inference(shared_context(device_), dtype, shape, input, output, scale, bias, mean, var,
                                 params.epsilon)) {
    throw RuntimeError(errmsg(fn, std::string("the DNN library cannot run batch norm for ") + dtype_name(dtype) +
                                      " with epsilon " + std::to_string(params.epsilon)));
  }
  call.finish();
}

void ROCmDNN::activation_forward(ir::OpType activation_type, DType dtype, const std::vector<int64_t>& shape,
                                 const void* input, void* output, float) {
  const char* fn = "activation_forward";
  check_float(dtype, fn);
  raw::Call call(caller_, fn);
  call.output(unary_op(activation_type, call.input(input, shape, dtype), fn), output);
}

void ROCmDNN::softmax_forward(DType dtype, const std::vector<int64_t>& shape, const void* input, void* output,
                              int axis, bool log) {
  const char* fn = "softmax_forward";
  check_float(dtype, fn);
  raw::Call call(caller_, fn);
  const Tensor x = call.input(input, shape, dtype);
  call.output(log ? log_softmax(x, axis) : softmax(x, axis), output);
}

void ROCmDNN::reduce(ir::OpType reduce_type, DType dtype, const std::vector<int64_t>& input_shape,
                     const void* input, const std::vector<int64_t>& output_shape, void* output,
                     const std::vector<int>& reduce_dims, void*, size_t) {
  const char* fn = "reduce";
  raw::Call call(caller_, fn);
  const Tensor x = call.input(input, input_shape, dtype);
  const bool keepdim = output_shape.size() == input_shape.size() && !input_shape.empty();
  Tensor y;
  switch (reduce_type) {
    case ir::OpType::Sum: y = sum(x, reduce_dims, keepdim); break;
    case ir::OpType::Mean: y = mean(x, reduce_dims, keepdim); break;
    case ir::OpType::Max: y = max(x, reduce_dims, keepdim); break;
    case ir::OpType::Min: y = min(x, reduce_dims, keepdim); break;
    case ir::OpType::Prod: y = prod(x, reduce_dims, keepdim); break;
    default:
      throw ValueError(errmsg(fn, std::string("reduce_type must be Sum, Mean, Max, Min or Prod, not ") +
                                      ir::op_type_name(reduce_type)));
  }
  check_output(output_shape, y.shape(), fn);
  if (y.dtype() != dtype) y = astype(y, dtype);
  call.output(y, output);
}

ROCmDNN& get_dnn() {
  static std::mutex mu;
  static auto* wrappers = new std::map<int, ROCmDNN*>;  // process lifetime, like the contexts
  const int device = std::max(0, get_current_device());
  std::lock_guard lk(mu);
  ROCmDNN*& slot = (*wrappers)[device];
  if (!slot) slot = new ROCmDNN();
  return *slot;
}

}  // namespace pyflame::backend::rocm
