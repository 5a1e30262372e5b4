// The backward pass: a reverse walk of the recorded graph that calls each
// primitive's vjp and sums the cotangents reaching every node. The walk
// builds a gradient graph and computes nothing; backward() then evaluates
// the leaves' gradients in one pass.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "ir/node_map.h"
#include "ir/primitives.h"
#include "pyflame/amp.h"
#include "pyflame/autograd.h"
#include "pyflame/ops.h"
#include "runtime/trace.h"

namespace pyflame {

struct GradHookList {
  std::vector<std::pair<uint64_t, GradHook>> hooks;
};

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

// ---- post-accumulate-grad hooks ----

std::atomic<uint64_t> g_next_hook{1};

std::vector<GradHook> hooks_of(const Tensor& leaf) {
  std::shared_ptr<Binding> b = binding_of(leaf.node());
  if (!b) return {};
  std::lock_guard<std::mutex> lock(b->mu);
  std::vector<GradHook> out;
  if (b->grad_hooks)
    for (auto& [id, h] : b->grad_hooks->hooks) out.push_back(h);
  return out;
}

// The leaves reached, in the order the walk finished their gradients: a
// leaf is complete once the last node reading it ran its vjp. `order` lists
// nodes outputs last; the walk runs it from the end.
std::vector<size_t> ready_order(const std::vector<Tensor>& order, const std::vector<Tensor>& leaves) {
  std::unordered_map<Node*, size_t> last;
  size_t step = 0;
  for (auto it = order.rbegin(); it != order.rend(); ++it, ++step) {
    Node* n = it->node();
    if (n->grad_leaf) continue;
    for (const Tensor& in : n->inputs)
      if (in.requires_grad() && in.node()->grad_leaf) last[in.node()] = step;
  }
  std::vector<size_t> idx(leaves.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  auto when = [&](size_t i) {
    auto f = last.find(leaves[i].node());
    return f == last.end() ? 0 : f->second + 1;  // a leaf that is an output: first
  };
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return when(a) < when(b); });
  return idx;
}

// Evaluates the accumulated gradients: in one pass, or, where a leaf has
// hooks, leaf by leaf in ready order, calling each leaf's hooks after its
// gradient is evaluated.
void eval_grads_and_call_hooks(const std::vector<Tensor>& order, const std::vector<Tensor>& leaves,
                               const std::vector<Tensor>& grads) {
  std::vector<std::vector<GradHook>> hooks;
  bool any = false;
  for (const Tensor& leaf : leaves) {
    hooks.push_back(hooks_of(leaf));
    any = any || !hooks.back().empty();
  }
  if (!any) {
    eval(grads);
    return;
  }
  for (size_t i : ready_order(order, leaves)) {
    grads[i].eval();
    for (const GradHook& h : hooks[i]) h(leaves[i]);
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
  std::vector<Tensor> updated, leaves;
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
      leaves.push_back(t);
    }
  }  // the cotangents go before the evaluation
  lock.unlock();  // evaluation is safe to share; a later backward adds onto these lazily
  eval_grads_and_call_hooks(order, leaves, updated);
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

uint64_t register_post_accumulate_grad_hook(const Tensor& leaf, GradHook hook) {
  const char* fn = "register_post_accumulate_grad_hook";
  if (!leaf.defined() || !leaf.requires_grad() || !leaf.node()->grad_leaf)
    throw ValueError(errmsg(fn, "only a leaf tensor that requires grad takes this hook (a parameter), got " +
                                    (leaf.defined() ? leaf.str() : std::string("an undefined tensor"))));
  Node* n = leaf.node();
  std::lock_guard<std::recursive_mutex> walk(g_autograd_mu);  // no backward reads the list meanwhile
  std::shared_ptr<Binding> b = binding_of(n);
  if (!b) {
    auto fresh = std::make_shared<Binding>();
    fresh->latest = leaf.node_ptr();
    b = install_binding(n, std::move(fresh));
  }
  std::lock_guard<std::mutex> lock(b->mu);
  if (!b->grad_hooks) b->grad_hooks = std::make_shared<GradHookList>();
  uint64_t id = g_next_hook++;
  b->grad_hooks->hooks.emplace_back(id, std::move(hook));
  return id;
}

void remove_post_accumulate_grad_hook(const Tensor& leaf, uint64_t id) {
  if (!leaf.defined()) return;
  std::shared_ptr<Binding> b = binding_of(leaf.node());
  if (!b) return;
  std::lock_guard<std::mutex> lock(b->mu);
  if (!b->grad_hooks) return;
  auto& h = b->grad_hooks->hooks;
  h.erase(std::remove_if(h.begin(), h.end(), [id](const auto& e) { return e.first == id; }), h.end());
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
