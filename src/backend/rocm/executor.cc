// ROCmExecutor (pyflame/backend/rocm/executor.h): the spec's executor over
// the eval loop.
#include "pyflame/backend/rocm/executor.h"

#include <chrono>

#include "backend/rocm/context.h"
#include "backend/rocm/memory.h"
#include "pyflame/errors.h"

namespace pyflame::backend::rocm {

ROCmExecutor::ROCmExecutor(Config config) : config_(config) {
  const int n = get_device_count();
  if (config_.device_id < 0 || config_.device_id >= n) {
    throw RuntimeError(errmsg("ROCmExecutor", "invalid device id " + std::to_string(config_.device_id) + " (" +
                                                  std::to_string(n) + " device(s) available)"));
  }
  if (config_.workspace_size_mb) get_memory_manager(config_.device_id).warmup({config_.workspace_size_mb << 20});
}

ROCmExecutor::~ROCmExecutor() = default;

ExecutionResult ROCmExecutor::execute(const std::vector<Tensor>& outputs) {
  const Device dev = Device::rocm(config_.device_id);
  for (const Tensor& t : outputs) {
    if (!t.defined()) throw ValueError(errmsg("execute", "an output tensor is undefined"));
    if (t.device() != dev) {
      throw ValueError(errmsg("execute", "output on " + t.device().str() + ", but this executor runs on " +
                                             dev.str()));
    }
  }
  ExecutionResult result;
  result.num_outputs = outputs.size();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    DeviceGuard g(config_.device_id);
    eval(outputs);
    if (config_.sync_after_launch || config_.enable_profiling) {
      PF_HIP_CHECK(hipStreamSynchronize(shared_context(config_.device_id).stream));
    }
    result.success = true;
  } catch (const std::exception& e) {
    result.error = e.what();
  }
  if (config_.enable_profiling) {
    result.elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  return result;
}

DeviceInfo ROCmExecutor::get_device_info() const { return rocm::get_device_info(config_.device_id); }

MemoryStats ROCmExecutor::get_memory_stats() const { return memory_stats(config_.device_id); }

}  // namespace pyflame::backend::rocm
