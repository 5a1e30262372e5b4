// The spec's DNN wrapper, ROCmDNN: convolution, pooling and batch-norm
// inference through the backend's MIOpen (AMD) / cuDNN (NVIDIA) layer (the
// same calls, algorithm tuning cache and workspace pool tensor ops use), and
// activation, softmax and reductions through the backend's own kernels.
// Tensors are dense row-major device arrays (N, C, H, W for the 2-d ops) of
// float32, float16 or bfloat16. Work is queued as if on the stream given to
// set_stream (the device's compute stream by default): it starts after what
// that stream holds and the stream waits for the output. One instance per
// thread, as the spec says.
//
// Narrower than the spec in two places: the workspace arguments are accepted
// and unused (the wrapper takes workspace from the device's stream-ordered
// pool; conv2d_forward_workspace_size returns 0), and batch-norm training
// is not offered here (pyflame::batch_norm records it as an op).
#pragma once
#include <cstdint>
#include <vector>

#include "pyflame/backend/rocm/gpu_build.h"
#include "backend/rocm/gpu/libs.h"  // NOLINT(build/include_order)
#include "pyflame/backend/rocm/op_type.h"
#include "pyflame/dtype.h"

namespace pyflame::backend::rocm {

using DType = Dtype;

struct ConvParams {
  std::vector<int> padding{0, 0};
  std::vector<int> stride{1, 1};
  std::vector<int> dilation{1, 1};
  int groups = 1;

  static ConvParams Conv2D(int pad_h, int pad_w, int stride_h = 1, int stride_w = 1, int dilation_h = 1,
                           int dilation_w = 1, int groups = 1);
};

struct PoolParams {
  std::vector<int> kernel_size{1, 1};
  std::vector<int> padding{0, 0};
  std::vector<int> stride{1, 1};
  bool ceil_mode = false;  // only false: the output size follows the floor rule

  static PoolParams Pool2D(int kernel_h, int kernel_w, int pad_h = 0, int pad_w = 0, int stride_h = 1,
                           int stride_w = 1);
};

struct BatchNormParams {
  double epsilon = 1e-5;
  double momentum = 0.1;
  bool training = false;  // inference only in this wrapper
};

class ROCmDNN {
 public:
  ROCmDNN();  // on the current device (device 0 before any is selected)
  ~ROCmDNN();
  ROCmDNN(const ROCmDNN&) = delete;
  ROCmDNN& operator=(const ROCmDNN&) = delete;

  void set_stream(hipStream_t stream);
  // The library handle (miopenHandle_t on AMD, cudnnHandle_t on NVIDIA),
  // bound to the device's compute stream, where the wrapper's work runs.
  gpu::dnn_handle_t handle() const;

  // output (N, K, Ho, Wo) = conv(input (N, C, H, W), weight (K, C/groups, kh, kw)).
  void conv2d_forward(DType dtype, const std::vector<int64_t>& input_shape, const void* input,
                      const std::vector<int64_t>& weight_shape, const void* weight,
                      const std::vector<int64_t>& output_shape, void* output, const ConvParams& params,
                      void* workspace = nullptr, size_t workspace_size = 0);
  size_t conv2d_forward_workspace_size(DType dtype, const std::vector<int64_t>& input_shape,
                                       const std::vector<int64_t>& weight_shape,
                                       const std::vector<int64_t>& output_shape, const ConvParams& params);

  // pool_type MaxPool or AvgPool (padding counted in the average, PyTorch's
  // default).
  void pooling2d_forward(ir::OpType pool_type, DType dtype, const std::vector<int64_t>& input_shape,
                         const void* input, const std::vector<int64_t>& output_shape, void* output,
                         const PoolParams& params);

  // y = (x - mean) / sqrt(var + eps) * scale + bias over channel axis 1;
  // scale, bias, mean and var are float32 (C).
  void batchnorm_forward_inference(DType dtype, const std::vector<int64_t>& shape, const void* input,
                                   void* output, const float* scale, const float* bias, const float* mean,
                                   const float* var, const BatchNormParams& params = {});

  // activation_type: a unary OpType (Relu, Sigmoid, Tanh, Gelu, Silu, ...);
  // alpha is unused by these.
  void activation_forward(ir::OpType activation_type, DType dtype, const std::vector<int64_t>& shape,
                          const void* input, void* output, float alpha = 0.0f);
  void softmax_forward(DType dtype, const std::vector<int64_t>& shape, const void* input, void* output,
                       int axis = -1, bool log_softmax = false);
  // reduce_type: Sum, Mean, Max, Min or Prod over reduce_dims; output_shape
  // is the input's with the reduced axes removed or kept as 1.
  void reduce(ir::OpType reduce_type, DType dtype, const std::vector<int64_t>& input_shape, const void* input,
              const std::vector<int64_t>& output_shape, void* output, const std::vector<int>& reduce_dims,
              void* workspace = nullptr, size_t workspace_size = 0);

 private:
  int device_;
  hipStream_t caller_;
};

// The DNN wrapper of the current device (one per device, process lifetime).
ROCmDNN& get_dnn();

}  // namespace pyflame::backend::rocm
