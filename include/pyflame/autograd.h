// Reverse-mode automatic differentiation over the lazy graph.
//
// A tensor requires grad when the user marks it (a grad leaf) or when an op
// reads one that does while grad mode is on. backward() walks the recorded
// graph from an output and calls each primitive's vector-Jacobian product,
// which is written with ops: the gradient is itself a graph, evaluated on the
// same devices as the forward pass.
#pragma once
#include <functional>
#include <optional>
#include <vector>

#include "pyflame/tensor.h"

namespace pyflame {

// Grad mode is per thread and on by default. While off, ops record no
// autograd links (inference, optimizer updates).
bool is_grad_enabled();
void set_grad_enabled(bool on);

// Scoped grad mode: NoGradGuard g; ... (restores the previous mode).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool on) : prev_(is_grad_enabled()) { set_grad_enabled(on); }
  ~GradModeGuard() { set_grad_enabled(prev_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};
struct NoGradGuard : GradModeGuard {
  NoGradGuard() : GradModeGuard(false) {}
};

// A tensor with the same data and no autograd history.
Tensor detach(const Tensor& x);

// Accumulates d(output)/d(leaf) into every reachable leaf's grad() and
// evaluates those gradients. `gradient` is required unless the output has
// one element. Without retain_graph the traversed graph is released (a
// second backward through it raises).
void backward(const Tensor& output, const std::optional<Tensor>& gradient = {},
              bool retain_graph = false);

// PyTorch's register_post_accumulate_grad_hook: backward() calls hook(leaf)
// once per backward that reaches the leaf, after it accumulated and
// evaluated the leaf's grad(), leaves in the order the backward walk
// finished their gradients (the last consumer's vjp done). With hooks
// present backward evaluates leaf by leaf in that order, so a hook can start
// work on a gradient (DDP's bucket all-reduce) while later ones compute.
// Hooks follow the handle through in-place rebinds (optimizer steps). The
// id removes the hook. Leaves only: a tensor that requires grad and was not
// computed from one.
using GradHook = std::function<void(const Tensor& leaf)>;
uint64_t register_post_accumulate_grad_hook(const Tensor& leaf, GradHook hook);
void remove_post_accumulate_grad_hook(const Tensor& leaf, uint64_t id);

// Gradients of `outputs` (weighted by `grad_outputs`, default ones for
// single-element outputs) with respect to `inputs`, returned lazily and not
// accumulated anywhere. An input the outputs do not depend on gets zeros.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {});

// Custom gradients. custom_vjp(value, inputs, fn) returns a tensor equal to
// `value` (sharing its data) that, when grad mode is on and some input
// requires grad, is linked to `inputs`: backward calls fn(cotan, argnums)
// and takes one cotangent per entry of argnums (indices into `inputs`), each
// shaped like that input. `value` is typically computed under NoGradGuard
// from the inputs (pf.autograd.Function, checkpointing); its own history is
// cut. Without an input that requires grad the value is returned detached,
// unless `always` is set: then a floating value is linked whenever grad mode
// is on and fn is called (with no argnums when no input requires grad), for
// callbacks that reach tensors they do not list (checkpointing recomputes
// with the parameters a module closes over).
using CustomVjpFn =
    std::function<std::vector<Tensor>(const Tensor& cotan, const std::vector<int>& argnums)>;
Tensor custom_vjp(const Tensor& value, const std::vector<Tensor>& inputs, CustomVjpFn fn,
                  bool always = false);

}  // namespace pyflame
