// A fused region: elementwise nodes of one shape evaluated as one kernel.
// The fusion pass (ir/passes/fuse.cc) builds it as a small SSA tape; each
// backend runs the tape (backend/cpu/fused.cc block by block, the GPU
// backend through a run-time compiled kernel). Interior values never reach
// memory, and every step rounds to its node's dtype exactly as the unfused
// kernel does, so fused and unfused results agree bit for bit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/primitives.h"

namespace pyflame {

struct FusedStep {
  enum class Kind : uint8_t { Load, Scalar, Unary, Binary, Where, Cast };
  Kind kind;
  uint8_t op = 0;  // UnaryOp or BinaryOp
  Dtype dtype;     // of this step's value
  int a = -1, b = -1, c = -1;  // operand steps (earlier in the tape)
  int slot = -1;   // Load: index into loads; Scalar: index into scalars
};

struct FusedRegion {
  Shape shape;
  Device device;
  std::vector<FusedStep> steps;  // the last step is the output
  // External inputs, each already broadcast to `shape` (any strides): read
  // as strided loads. Alive until the region runs (their consumers are).
  std::vector<Node*> loads;
  std::vector<double> scalars;  // Full values, converted to the step's dtype when used
  std::vector<Node*> members;   // the nodes computed, inputs first; the last is the output
  // The members written to memory, each with its step: the output (last)
  // and the members also needed outside the region (a user handle, a later
  // consumer), which the kernel stores on its way (multi-output regions).
  std::vector<Node*> outputs;
  std::vector<int> output_steps;
  // A reduction anchor: the region's values (the last step, over `shape`)
  // are reduced over `reduce_axes` into its one output, the Reduce node; no
  // elementwise value is written.
  bool reduce = false;
  ReduceOp reduce_op = ReduceOp::Sum;
  std::vector<int> reduce_axes;
  // The members and the constants' nodes the region replaces, in evaluation
  // order (and the Reduce node last): what runs one by one when a GPU region
  // has no kernel.
  std::vector<Node*> unfused_order;
  int ops() const;              // compute steps (not loads or scalars)
  // The tape without values or addresses: the kernel cache's key, together
  // with the loads' access kinds the backend adds.
  std::string signature() const;
  std::string describe() const;  // "gelu(add(mul(x0, x1), x2))"-like, for explain()
};

// Backend entries; `outs` as `outputs`. The CPU one always runs; the GPU one
// returns false when no compiled kernel is available (the caller then runs
// the members unfused).
void eval_fused_cpu(const FusedRegion& r, const std::vector<Tensor>& loads, std::vector<Tensor>& outs);
bool eval_fused_gpu(const FusedRegion& r, const std::vector<Tensor>& loads, std::vector<Tensor>& outs);
// The kernel a region runs as, for explain(): "cpu blocks", or the GPU
// kernel's name and whether it is compiled, cached or unavailable.
std::string fused_kernel_gpu(const FusedRegion& r);
inline std::string fused_kernel_name(const FusedRegion& r) {
  return r.device.is_cpu() ? "cpu blocked kernel" : fused_kernel_gpu(r);
}

}  // namespace pyflame
