// The backward pass: a reverse walk of the recorded graph that calls each
// primitive's vjp and sums the cotangents reaching every node. The walk
// builds a gradient graph and computes nothing; backward() then evaluates
// the leaves' gradients in one pass.
#include <mutex>
#include <unordered_set>

#include "ir/node_map.h"
#include "ir/primitives.h"
#include "pyflame/amp.h"
#include "pyflame/autograd.h"
#include "pyflame/ops.h"
#include "runtime/trace.h"

namespace pyflame {

namespace {
thread_local bool g_grad_enabled = true;

// Held while a backward pass walks the graph and accumulates into leaves, so
// threads whose graphs share nodes or leaves see each other's updates whole
// (docs/design/threads.md). Evaluation runs outside it.
std::recursive_mutex g_autograd_mu;  // recursive: a custom backward may run backward()

// Nodes where a walk stops and keeps the cotangent: grad leaves, and the
// inputs of a functional grad() call.
struct Stops {
  const std::unordered_set<Node*>* extra = nullptr;
  bool operator()(Node* n) const { return n->grad_leaf || (extra && extra->count(n)); }
};

// Nodes that need a cotangent, outputs last; the walk stops at grad leaves
// and at nodes that do not require grad.
std::vector<Tensor> backward_order(const std::vector<Tensor>& outputs, Stops stop) {
  std::vector<Tensor> order;
  NodeSet seen;
  std::vector<std::pair<Tensor, size_t>> stack;
  auto visit = [&](const Tensor& t) {
    if (t.requires_grad() && seen.insert(t.node())) stack.emplace_back(t, 0);
  };
  for (const auto& out : outputs) {  // one at a time: outputs may feed each other
    visit(out);
    while (!stack.empty()) {
      auto& [t, i] = stack.back();
      Node* n = t.node();
      if (!stop(n) && i < n->inputs.size()) {
        Tensor in = n->inputs[i++];  // a copy: visit() may grow the stack
        visit(in);
      } else {
        order.push_back(t);
        stack.pop_back();
      }
    }
  }
  return order;
}

void check_output(const Tensor& out, const char* fn) {
  if (!out.defined()) throw ValueError(errmsg(fn, "got an undefined tensor"));
  if (!out.requires_grad()) {
    throw ValueError(errmsg(fn, "the output does not require grad: no input it depends on "
                                "has requires_grad=True (or it was computed under no_grad)"));
  }
}

Tensor seed_cotangent(const Tensor& out, const Tensor* given, const char* fn) {
  if (!given || !given->defined()) {
    if (out.size() != 1) {
      throw ValueError(errmsg(fn, "a gradient must be given for an output of shape " +
                                      shape_str(out.shape()) +
                                      " (only single-element outputs get an implicit one)"));
    }
    return ones(out.shape(), out.dtype(), out.device());
  }
  if (given->shape() != out.shape()) {
    throw ValueError(errmsg(fn, "gradient shape " + shape_str(given->shape()) +
                                    " does not match the output shape " + shape_str(out.shape())));
  }
  if (given->device() != out.device()) {
    throw ValueError(errmsg(fn, "gradient is on " + given->device().str() + " but the output is on " +
                                    out.device().str()));
  }
  return astype(*given, out.dtype());
}

// PyTorch's rule: a tensor the vjp may read must not have been written in
// place since the node was recorded (the lazy graph would still hold the
// old values, but a program relying on that is not portable).
void check_input_versions(const Node& n) {
  for (size_t i = 0; i < n.input_versions.size() && i < n.inputs.size(); ++i) {
    const Tensor& in = n.inputs[i];
    const uint32_t now = in.version();
    if (now == n.input_versions[i]) continue;
    throw RuntimeError(errmsg(
        "backward", std::string("one of the tensors needed for the gradient of ") + n.prim->name() +
                        " has been modified by an in-place operation: " + in.str() +
                        " is at version " + std::to_string(now) + "; expected version " +
                        std::to_string(n.input_versions[i]) + " instead"));
  }
}

// Cotangents by node (an undefined tensor: none, or dropped).
using Cotangents = NodeMap<Tensor>;

const Tensor* cotangent(const Cotangents& cot, const Node* n) {
  const Tensor* c = cot.find(n);
  return c && c->defined() ? c : nullptr;
}

// Runs the reverse walk and leaves in `cot` the cotangent of every node
// reached where the walk stops.
void propagate(const std::vector<Tensor>& outputs, const std::vector<Tensor>& seeds,
               std::vector<Tensor>& order, Cotangents& cot, Stops stop = {}) {
  NoGradGuard no_grad;  // gradient graphs are not differentiated again
  AutocastGuard no_autocast(std::nullopt);  // vjps keep the forward's dtypes
  auto accumulate = [&cot](Node* n, const Tensor& g) {
    auto [c, fresh] = cot.insert(n, g);
    if (!fresh) *c = c->defined() ? add(*c, g) : g;
  };
  for (size_t i = 0; i < outputs.size(); ++i) accumulate(outputs[i].node(), seeds[i]);
  order = backward_order(outputs, stop);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* n = it->node();
    Tensor* c = cot.find(n);
    if (stop(n) || !c || !c->defined()) continue;
    if (!n->prim || n->graph_released) {
      throw RuntimeError(errmsg("backward", "the graph was already released by an earlier "
                                            "backward(); pass retain_graph=True to backward "
                                            "through it twice"));
    }
    check_input_versions(*n);
    std::vector<int> argnums;
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      if (n->inputs[i].requires_grad()) argnums.push_back(static_cast<int>(i));
    }
    std::vector<Tensor> grads = n->prim->vjp(n->inputs, *c, *it, argnums);
    for (size_t k = 0; k < argnums.size(); ++k) {
      const Tensor& in = n->inputs[argnums[k]];
      Tensor g = grads.at(k);
      if (g.shape() != in.shape()) {
        throw RuntimeError(errmsg("backward", std::string("internal error: the vjp of ") +
                                                  n->prim->name() + " returned " + g.str() +
                                                  " for input " + in.str()));
      }
      accumulate(in.node(), astype(g, in.dtype()));
    }
    *cot.find(n) = Tensor();  // intermediate cotangents die as we go (c may have moved)
  }
}

std::vector<Tensor> make_seeds(const std::vector<Tensor>& outputs,
                               const std::vector<Tensor>& given, const char* fn) {
  if (!given.empty() && given.size() != outputs.size()) {
    throw ValueError(errmsg(fn, "got " + std::to_string(given.size()) + " gradients for " +
                                    std::to_string(outputs.size()) + " outputs"));
  }
  std::vector<Tensor> seeds;
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_output(outputs[i], fn);
    seeds.push_back(seed_cotangent(outputs[i], given.empty() ? nullptr : &given[i], fn));
  }
  return seeds;
}
}  // namespace

std::vector<Tensor> Primitive::vjp(const std::vector<Tensor>&, const Tensor&, const Tensor&,
                                   const std::vector<int>&) {
  throw ValueError(errmsg("backward", std::string(name()) + " is not differentiable"));
}

bool is_grad_enabled() { return g_grad_enabled; }
void set_grad_enabled(bool on) { g_grad_enabled = on; }

Tensor detach(const Tensor& x) {
  if (!x.defined()) throw ValueError(errmsg("detach", "got an undefined tensor"));
  NoGradGuard no_grad;  // an evaluated x: the view just shares its buffer
  return Tensor::make_view(x.shape(), x.strides(), x.offset(), std::make_shared<StopGradient>(), x);
}

void backward(const Tensor& output, const std::optional<Tensor>& gradient, bool retain_graph) {
  std::vector<Tensor> outputs{output};
  std::vector<Tensor> given;
  if (gradient) given.push_back(*gradient);
  std::vector<Tensor> seeds = make_seeds(outputs, given, "backward");
  std::unique_lock<std::recursive_mutex> lock(g_autograd_mu);
  std::vector<Tensor> order;
  std::vector<Tensor> updated;
  {
    Cotangents cot;
    propagate(outputs, seeds, order, cot);
    NoGradGuard no_grad;
    for (Tensor& t : order) {
      const Tensor* c = cotangent(cot, t.node());
      if (!t.node()->grad_leaf || !c) continue;
      Tensor g = t.grad();
      Tensor sum = g.defined() ? add(g, *c) : *c;
      t.set_grad(sum);
      updated.push_back(sum);
    }
  }  // the cotangents go before the evaluation
  lock.unlock();  // evaluation is safe to share; a later backward adds onto these lazily
  eval(updated);
  if (retain_graph) return;
  // Release the walked graph: evaluated intermediates keep only their data.
  lock.lock();
  for (const Tensor& t : order) {
    Node* n = t.node();
    if (n->grad_leaf || n->graph_released) continue;
    n->graph_released = true;
    // A trace keeps the values' graphs (the replay program reads them).
    // Unevaluated nodes keep what computing them needs.
    if (t.is_evaluated() && !runtime::trace_keeps(n)) {
      n->inputs.clear();
      n->prim.reset();
    }
  }
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs) {
  for (const auto& x : inputs) {
    if (!x.defined() || !x.requires_grad()) {
      throw ValueError(errmsg("grad", "every input must require grad"));
    }
  }
  std::vector<Tensor> seeds = make_seeds(outputs, grad_outputs, "grad");
  // The walk stops at the inputs (leaves or not) and keeps their cotangents.
  std::unordered_set<Node*> stops;
  for (const auto& x : inputs) stops.insert(x.node());
  std::vector<Tensor> order;
  Cotangents cot;
  {
    std::lock_guard<std::recursive_mutex> lock(g_autograd_mu);
    propagate(outputs, seeds, order, cot, Stops{&stops});
  }
  std::vector<Tensor> result;
  NoGradGuard no_grad;
  for (const auto& x : inputs) {
    const Tensor* c = cotangent(cot, x.node());
    result.push_back(c ? *c : zeros(x.shape(), x.dtype(), x.device()));
  }
  return result;
}

}  // namespace pyflame
