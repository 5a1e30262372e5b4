// Custom vector-Jacobian products: a node equal to a computed value whose
// gradient comes from a caller-supplied function. pf.autograd.Function and
// checkpointing (which recomputes in its backward) are built on it.
#include <string>

#include "ir/primitive.h"
#include "pyflame/autograd.h"

namespace pyflame {

namespace {

// Input 0 is the value (the output shares its buffer and layout); inputs
// 1.. are the arguments the callback differentiates.
class CustomVjp : public ViewPrimitive {
 public:
  explicit CustomVjp(CustomVjpFn fn) : fn_(std::move(fn)) {}
  const char* name() const override { return "custom_vjp"; }
  // The callback is opaque: each node is equal only to itself.
  PF_PARAMS(reinterpret_cast<uintptr_t>(this))

  std::vector<Tensor> vjp(const std::vector<Tensor>& inputs, const Tensor& cotan, const Tensor&,
                          const std::vector<int>& argnums) override {
    std::vector<int> args;
    for (int i : argnums) {
      if (i == 0) throw RuntimeError(errmsg("backward", "internal error: a custom value requires grad"));
      args.push_back(i - 1);
    }
    std::vector<Tensor> grads = fn_(cotan, args);
    if (grads.size() != args.size()) {
      throw ValueError(errmsg("backward", "a custom backward returned " + std::to_string(grads.size()) +
                                              " gradients for " + std::to_string(args.size()) +
                                              " inputs that require grad"));
    }
    for (size_t k = 0; k < grads.size(); ++k) {
      const Tensor& in = inputs[argnums[k]];
      const Tensor& g = grads[k];
      if (!g.defined() || g.shape() != in.shape() || g.device() != in.device()) {
        throw ValueError(errmsg("backward", "a custom backward returned " +
                                                (g.defined() ? g.str() : std::string("nothing")) +
                                                " as the gradient of input " + std::to_string(args[k]) +
                                                ", expected the shape and device of " + in.str()));
      }
    }
    return grads;
  }

 private:
  CustomVjpFn fn_;
};

}  // namespace

Tensor custom_vjp(const Tensor& value, const std::vector<Tensor>& inputs, CustomVjpFn fn, bool always) {
  if (!value.defined()) throw ValueError(errmsg("custom_vjp", "got an undefined value"));
  if (!fn) throw ValueError(errmsg("custom_vjp", "got no backward function"));
  Tensor v = value.requires_grad() ? detach(value) : value;
  bool needs_grad = always;
  for (const Tensor& t : inputs) {
    if (!t.defined()) throw ValueError(errmsg("custom_vjp", "got an undefined input"));
    needs_grad = needs_grad || t.requires_grad();
  }
  if (!needs_grad || !is_grad_enabled() || !is_floating(v.dtype())) return v;
  // A view of the value (same layout) that also lists the inputs, so the
  // backward walk reaches them through this node.
  auto n = std::make_shared<Node>();
  n->shape = v.shape();
  n->strides = v.strides();
  n->offset = v.offset();
  n->dtype = v.dtype();
  n->device = v.device();
  if (v.is_evaluated()) n->buffer = v.buffer();
  n->prim = std::make_shared<CustomVjp>(std::move(fn));
  n->inputs.reserve(inputs.size() + 1);
  n->inputs.push_back(v);
  n->inputs.insert(n->inputs.end(), inputs.begin(), inputs.end());
  n->requires_grad = true;
  return Tensor(std::move(n));
}

}  // namespace pyflame
