// Automatic kernel fusion (spec 002: FusedOpType, can_fuse). Evaluation
// groups chains of elementwise ops into one kernel per region without any
// annotation; see docs/design/fusion.md.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pyflame/tensor.h"

namespace pyflame {

// The spec's named patterns. Each is an elementwise region after its anchor
// (GEMM, convolution) or a region on its own (ADD_RELU, MUL_ADD).
enum class FusedOpType {
  MATMUL_BIAS,
  MATMUL_BIAS_RELU,
  MATMUL_BIAS_GELU,
  CONV_BIAS,
  CONV_BIAS_RELU,
  CONV_BN_RELU,
  ADD_RELU,
  MUL_ADD
};
const char* fused_op_name(FusedOpType t);

// The pattern a sequence of op names ("matmul", "add", "relu", ...) forms
// when evaluated, or nullopt when it is not one of the spec's patterns.
std::optional<FusedOpType> can_fuse(const std::vector<std::string>& ops);

// On by default; PYFLAME_FUSION=0 sets the start value.
void set_fusion(bool on);
bool get_fusion();
// Fusion of GPU regions (run-time compiled kernels), under the switch above:
// on by default; PYFLAME_FUSION_GPU=0 sets the start value.
void set_fusion_gpu(bool on);
bool get_fusion_gpu();

// The plan an evaluation of `outputs` would follow now, one line per step:
// fused regions with their ops and kernel, single nodes by name.
std::string explain(const std::vector<Tensor>& outputs);

// Counters since start (or the last reset): regions evaluated fused, runs
// that fell back to unfused kernels, run-time compiles, disk and memory
// cache hits of compiled kernels, GEMMs with their bias or relu applied by
// the BLAS library.
struct FusionStats {
  uint64_t regions = 0;
  uint64_t fallbacks = 0;
  uint64_t compiles = 0;
  uint64_t disk_hits = 0;
  uint64_t memory_hits = 0;
  uint64_t gemm_epilogues = 0;  // GEMMs whose bias or relu the BLAS library applied
};
FusionStats fusion_stats();
void reset_fusion_stats();

}  // namespace pyflame
