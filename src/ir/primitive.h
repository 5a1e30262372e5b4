// A Primitive is the op attached to a graph node. It evaluates on each
// backend (eval_cpu in backend/cpu, eval_gpu in backend/rocm) into an output
// whose buffer the eval loop has already allocated. View primitives compute
// nothing: the output shares its input's buffer with its own layout.
#pragma once
#include <string>
#include <vector>

#include "pyflame/errors.h"
#include "pyflame/tensor.h"

namespace pyflame {

class Primitive {
 public:
  virtual ~Primitive() = default;
  virtual const char* name() const = 0;
  virtual void eval_cpu(const std::vector<Tensor>& inputs, Tensor& out) = 0;
  virtual void eval_gpu(const std::vector<Tensor>& inputs, Tensor& out) = 0;
  virtual bool is_view() const { return false; }
  // The input whose buffer the output may take over (an in-place write),
  // or -1. The eval loop donates it only when nothing else can observe the
  // input afterwards (see donated_buffer in runtime/eval.cc); the primitive
  // then sees out.buffer() == inputs[i].buffer() and writes only what
  // changes.
  virtual int donor_input() const { return -1; }
  // Vector-Jacobian product: the cotangents of inputs[i] for each i in
  // argnums, given the output's cotangent `cotan` (the output's shape and
  // dtype). Written with ops, so gradients are graphs on any backend. The
  // default raises "not differentiable".
  virtual std::vector<Tensor> vjp(const std::vector<Tensor>& inputs, const Tensor& cotan,
                                  const Tensor& out, const std::vector<int>& argnums);
};

// Declares a primitive's two backend entries (defined in backend/cpu and
// backend/rocm/kernels).
#define PF_EVAL_DECLS                                                    \
  void eval_cpu(const std::vector<Tensor>& inputs, Tensor& out) override; \
  void eval_gpu(const std::vector<Tensor>& inputs, Tensor& out) override;

// Declares a primitive's vector-Jacobian product (defined in src/autograd).
#define PF_VJP_DECL                                                                     \
  std::vector<Tensor> vjp(const std::vector<Tensor>& inputs, const Tensor& cotan,       \
                          const Tensor& out, const std::vector<int>& argnums) override;

// Shares input 0's buffer; the layout was fixed when the node was recorded.
class ViewPrimitive : public Primitive {
 public:
  bool is_view() const final { return true; }
  void eval_cpu(const std::vector<Tensor>&, Tensor&) final {}
  void eval_gpu(const std::vector<Tensor>&, Tensor&) final {}
};

}  // namespace pyflame
