// The spec's graph executor. PyFlame's graph is the lazy tensors themselves:
// execute() evaluates the given output tensors (and everything they depend
// on) on the executor's device, through the same eval loop as
// pyflame::eval. The spec's ir::Graph + node ids become the output tensors.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "pyflame/backend/rocm.h"
#include "pyflame/backend/rocm/gpu_build.h"
#include "pyflame/tensor.h"

namespace pyflame::backend::rocm {

struct ExecutorConfig {
  int device_id = 0;
  bool enable_profiling = false;   // time each execute() (wall clock, to completion)
  bool sync_after_launch = false;  // wait for the device after each execute()
  size_t workspace_size_mb = 256;  // pre-allocated into the device's memory pool
};

struct ExecutionResult {
  bool success = false;
  std::string error;       // the exception message when !success
  double elapsed_ms = 0;   // with enable_profiling
  size_t num_outputs = 0;
};

class ROCmExecutor {
 public:
  using Config = ExecutorConfig;
  explicit ROCmExecutor(Config config = {});  // RuntimeError for a device that is not there
  ~ROCmExecutor();

  // Evaluates `outputs`, which must live on this executor's device
  // (ValueError otherwise). A failure during evaluation is reported in the
  // result (success false, error), not thrown.
  ExecutionResult execute(const std::vector<Tensor>& outputs);

  DeviceInfo get_device_info() const;
  MemoryStats get_memory_stats() const;
  const Config& config() const { return config_; }

 private:
  Config config_;
};

}  // namespace pyflame::backend::rocm
