#include "runtime/program.h"

#include <algorithm>
#include <unordered_set>

#include "ir/primitives.h"
#include "ir/primitives_index.h"
#include "ir/primitives_sort.h"
#include "ir/passes/fuse.h"
#include "runtime/plan_scope.h"

namespace pyflame::runtime {

namespace {

// The key a random primitive draws with, or null for any other primitive.
uint64_t* key_of(Primitive* p) {
  if (auto* r = dynamic_cast<Random*>(p)) return &r->key;
  if (auto* d = dynamic_cast<Dropout*>(p)) return &d->key;
  if (auto* m = dynamic_cast<Multinomial*>(p)) return &m->key;
  return nullptr;
}

// A copy of random primitive p drawing with `key`.
std::shared_ptr<Primitive> with_key(const Primitive* p, uint64_t key) {
  std::shared_ptr<Primitive> c;
  if (auto* r = dynamic_cast<const Random*>(p)) c = std::make_shared<Random>(*r);
  if (auto* d = dynamic_cast<const Dropout*>(p)) c = std::make_shared<Dropout>(*d);
  if (auto* m = dynamic_cast<const Multinomial*>(p)) c = std::make_shared<Multinomial>(*m);
  *key_of(c.get()) = key;
  return c;
}

std::shared_ptr<Node> grad_slot(const Tensor& owner) {
  Tensor g = owner.grad();
  return g.defined() ? g.node_ptr() : nullptr;
}

uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull + (h >> 29); }

}  // namespace

Program::Layout Program::Layout::of(const Node* n) {
  return {n->shape, n->strides, n->offset, n->dtype, n->device, n->requires_grad};
}

bool Program::Layout::matches(const Node* n) const {
  return n->dtype == dtype && n->device == device && n->requires_grad == requires_grad &&
         n->offset == offset && n->shape == shape && n->strides == strides;
}

Program::Program(const Trace& t, const std::vector<Tensor>& args, const std::vector<Tensor>& outputs,
                 const std::vector<Tensor>& rebound)
    : draws_(t.rng_end - t.rng_start) {
  for (size_t i = 0; i < args.size(); ++i) {
    args_.push_back(Layout::of(args[i].node()));
    // A tensor passed twice is read as its first argument: a replay needs
    // the same tensor there again.
    auto [first, fresh] = index_.emplace(args[i].node(), ref(Arg, static_cast<int32_t>(i)));
    if (!fresh) repeats_.push_back({static_cast<int32_t>(i), first->second & 0xfffffff});
  }
  // The traced nodes every result needs, inputs first (ids grow in
  // recording order, so sorting by id is a topological order that also
  // keeps the order of random draws).
  std::vector<std::shared_ptr<Node>> roots;
  for (const auto& v : outputs) roots.push_back(v.node_ptr());
  for (const auto& v : rebound) roots.push_back(v.node_ptr());
  // The .grad slots the function wrote: of tensors made before the trace,
  // and of the values it rebound handles to (an optimizer keeps .grad).
  std::vector<std::pair<std::shared_ptr<Node>, std::shared_ptr<Node>>> writes;
  for (const auto& n : t.grad_writes) writes.emplace_back(n, grad_slot(Tensor(n)));
  for (const auto& v : rebound) {
    if (!t.recorded(v.node())) continue;
    if (auto g = grad_slot(v)) writes.emplace_back(v.node_ptr(), std::move(g));
  }
  for (const auto& [n, g] : writes) {
    roots.push_back(n);
    if (g) roots.push_back(g);
  }
  std::vector<std::shared_ptr<Node>> traced, stack(roots);
  std::unordered_set<const Node*> seen;
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    if (!t.recorded(n.get()) || !n->prim || index_.count(n.get()) || !seen.insert(n.get()).second) {
      continue;
    }
    for (const auto& in : n->inputs) stack.push_back(in.node_ptr());
    traced.push_back(std::move(n));
  }
  std::sort(traced.begin(), traced.end(), [](const auto& a, const auto& b) { return a->id < b->id; });
  for (const auto& n : traced) {
    Step s;
    s.prim = n->prim;
    s.layout = Layout::of(n.get());
    s.grad_leaf = n->grad_leaf;
    s.released = n->graph_released;
    if (uint64_t* key = key_of(n->prim.get())) {
      auto draw = t.keys.find(*key);
      if (draw != t.keys.end()) s.draw = static_cast<int64_t>(draw->second);
    }
    for (const auto& in : n->inputs) s.inputs.push_back(value_of(t, in.node_ptr()));
    index_.emplace(n.get(), ref(Val, static_cast<int32_t>(steps_.size())));
    steps_.push_back(std::move(s));
  }
  for (const auto& v : outputs) outputs_.push_back(value_of(t, v.node_ptr()));
  for (const auto& v : rebound) {
    rebound_.push_back(value_of(t, v.node_ptr()));
    int32_t cap = -1;
    const std::shared_ptr<Binding> b = binding_of(v.node());
    for (size_t c = 0; c < captured_.size() && b; ++c) {
      if (captured_[c].binding == b) cap = static_cast<int32_t>(c);
    }
    rebound_cap_.push_back(cap);
  }
  for (const auto& [owner, g] : t.grad_reads) grad_reads_.push_back({value_of(t, owner), g != nullptr});
  for (const auto& [n, g] : writes) grad_writes_.push_back({value_of(t, n), g ? value_of(t, g) : -1});
  roots_ = outputs_;
  roots_.insert(roots_.end(), rebound_.begin(), rebound_.end());
  for (const GradWrite& g : grad_writes_) {
    if (g.grad >= 0) roots_.push_back(g.grad);
  }
  auto keep = [&](int32_t r) {
    if (r >= 0 && (r >> 28) == Val) steps_[r & 0xfffffff].kept = true;
  };
  for (int32_t r : roots_) keep(r);
  for (const GradWrite& g : grad_writes_) keep(g.owner);
  for (Step& s : steps_) s.kept |= s.released;
  index_.clear();
  // The trace kept how its evaluated nodes were made only for the program:
  // they now drop it as an evaluation outside a trace would (and backward's
  // release), so the traced call's results do not hold its whole graph.
  for (const auto& n : traced) {
    if (n->state.load(std::memory_order_acquire) == NodeState::Done && n->buffer &&
        (!n->requires_grad || n->grad_leaf || n->graph_released)) {
      n->inputs.clear();
      n->prim.reset();
    }
  }
  plan_graph();
  keep_plan(args);
}

// Every replay records the same steps and evaluates them in the same order,
// each held by the same holders (the replay's values and roots, the steps
// reading it), so the fusion plan, which rests only on that, is made once
// here over one recording. A replay whose evaluation meets anything else
// (an argument still pending, a fusion switch changed since) plans as usual.
void Program::keep_plan(const std::vector<Tensor>& args) {
  if (!fuse::enabled() || steps_.size() < 2) return;
  std::vector<Tensor> caps;
  if (!resolve(args, caps)) return;
  Values v{args, caps, {}, {}};
  instantiate(v, 0);  // no counters drawn: a random step's key does not shape the plan
  std::vector<Tensor> all = root_values(v);
  std::unordered_map<const Node*, int32_t> step_of;
  for (size_t i = 0; i < v.steps.size(); ++i) step_of.emplace(v.nodes[i], ref(Val, static_cast<int32_t>(i)));
  // Only the steps are pending: an argument or captured tensor in the order
  // (not evaluated yet) may be another node, or another constant, next time.
  const std::vector<std::shared_ptr<Node>> order = fuse::pending_order(all);
  if (order.size() != steps_.size()) return;
  auto index = [&](const Node* n) -> int32_t {
    auto it = step_of.find(n);
    if (it != step_of.end()) return it->second;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].node() == n) return ref(Arg, static_cast<int32_t>(i));
    }
    for (size_t i = 0; i < caps.size(); ++i) {
      if (caps[i].node() == n) return ref(Cap, static_cast<int32_t>(i));
    }
    return -1;
  };
  if (auto kept = fuse::KeptPlan::make(order, index)) plan_ = std::make_shared<const fuse::KeptPlan>(std::move(*kept));
}

int32_t Program::value_of(const Trace& t, const std::shared_ptr<Node>& n) {
  auto it = index_.find(n.get());
  if (it != index_.end()) return it->second;
  const int32_t v = capture(t, n);
  index_.emplace(n.get(), v);
  return v;
}

// A node the trace did not compute: a tensor made before the trace (the
// .grad of one the function read, or one followed through its Binding),
// or data the trace made.
int32_t Program::capture(const Trace& t, const std::shared_ptr<Node>& n) {
  Captured c;
  c.layout = Layout::of(n.get());
  if (t.recorded(n.get())) {
    c.constant = n;
  } else {
    // The .grad the function read, unless a handle holding the same node
    // was rebound by the function (a momentum buffer that began as a
    // gradient): then it is that handle's value.
    const std::shared_ptr<Binding> had = binding_of(n.get());
    std::shared_ptr<Node> latest = had ? had->current() : nullptr;
    for (const auto& [owner, g] : t.grad_reads) {
      if (g == n && !(latest && t.recorded(latest.get()))) {
        c.grad_of = value_of(t, owner);
        break;
      }
    }
    if (c.grad_of < 0) {
      const std::shared_ptr<Binding> b = had ? had : install_binding(n.get(), std::make_shared<Binding>());
      std::lock_guard<std::mutex> lock(b->mu);
      std::shared_ptr<Node> latest = b->latest.lock();
      if (!latest) b->latest = latest = n;
      // An older version someone still holds is that version, not its
      // handle's latest; a version the trace itself rebound was the latest
      // when the trace began.
      if (latest == n || t.recorded(latest.get())) c.binding = b;
      else c.constant = n;
    }
  }
  captured_.push_back(std::move(c));
  return ref(Cap, static_cast<int32_t>(captured_.size() - 1));
}

bool Program::resolve(const std::vector<Tensor>& args, std::vector<Tensor>& caps) const {
  if (args.size() != args_.size()) return false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].defined() || !args_[i].matches(args[i].node())) return false;
  }
  for (const auto& [i, first] : repeats_) {
    if (args[i].node() != args[first].node()) return false;
  }
  auto value = [&](int32_t r) -> const Tensor& {
    return (r >> 28) == Arg ? args[r & 0xfffffff] : caps[r & 0xfffffff];
  };
  caps.reserve(captured_.size());
  for (const Captured& c : captured_) {
    std::shared_ptr<Node> n;
    if (c.constant) n = c.constant;
    else if (c.binding) n = c.binding->current();
    else n = grad_slot(value(c.grad_of));
    if (!n || !c.layout.matches(n.get())) return false;
    caps.emplace_back(std::move(n));
  }
  for (const GradRead& g : grad_reads_) {
    if (value(g.owner).grad().defined() != g.defined) return false;
  }
  return true;
}

void Program::instantiate(Values& v, uint64_t first_draw) const {
  v.steps.reserve(steps_.size());
  v.nodes.reserve(steps_.size());
  for (const Step& s : steps_) {
    auto n = std::make_shared<Node>();
    n->shape = s.layout.shape;
    n->strides = s.layout.strides;
    n->offset = s.layout.offset;
    n->dtype = s.layout.dtype;
    n->device = s.layout.device;
    n->requires_grad = s.layout.requires_grad;
    n->grad_leaf = s.grad_leaf;
    n->prim = s.draw < 0 ? s.prim : with_key(s.prim.get(), rng_key(first_draw + s.draw));
    n->inputs.reserve(s.inputs.size());
    for (int32_t in : s.inputs) n->inputs.push_back(v(in));
    v.nodes.push_back(n.get());
    v.steps.emplace_back(std::move(n));
  }
  // Every step is read by a later one or is a root (kept), so each stays
  // alive without the replay's reference.
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (!steps_[i].kept) v.steps[i] = Tensor();
  }
}

std::vector<std::string> Program::step_names() const {
  std::vector<std::string> names;
  names.reserve(steps_.size());
  for (const Step& s : steps_) names.emplace_back(s.prim->name());
  return names;
}

std::vector<Tensor> Program::root_values(const Values& v) const {
  std::vector<Tensor> all;
  all.reserve(roots_.size());
  for (int32_t i : roots_) all.push_back(v(i));
  return all;
}

// What backward() released in the traced call is released after a replay
// too: a second backward() through it raises as it would eagerly, and the
// results do not hold the step's forward graph.
void Program::release(const Values& v) const {
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (!steps_[i].released) continue;
    Node* n = v.steps[i].node();
    n->graph_released = true;
    if (n->state.load(std::memory_order_acquire) == NodeState::Done && n->buffer) {
      n->inputs.clear();
      n->prim.reset();
    }
  }
}

Program::Result Program::results(const Values& v) const {
  for (const GradWrite& g : grad_writes_) {
    Tensor owner = v(g.owner);
    owner.set_grad(g.grad >= 0 ? v(g.grad) : Tensor());
  }
  Result r;
  for (int32_t i : outputs_) r.outputs.push_back(v(i));
  for (int32_t i : rebound_) r.rebound.push_back(v(i));
  return r;
}

std::vector<KnownHolders> Program::dying(const std::vector<Tensor>& caps,
                                         const std::vector<const Node*>& held) const {
  std::vector<KnownHolders> known;
  for (size_t i = 0; i < rebound_.size(); ++i) {
    const int32_t c = rebound_cap_[i];
    if (c < 0 || (rebound_[i] >> 28) != Val) continue;
    const Node* old = caps[c].node();
    if (std::any_of(known.begin(), known.end(), [&](const KnownHolders& k) { return k.node == old; })) continue;
    long refs = std::count(held.begin(), held.end(), old);
    for (const Tensor& t : caps) refs += t.node() == old;
    known.push_back({old, refs, 0});
  }
  return known;
}

std::optional<Program::Result> Program::replay(const std::vector<Tensor>& args,
                                               const std::vector<const Node*>& held) const {
  std::vector<Tensor> caps;
  if (!resolve(args, caps)) return std::nullopt;
  if (graph_) {
    if (auto r = replay_graph(args, caps, held)) return r;
  }
  Values v{args, caps, {}, {}};
  instantiate(v, draws_ ? rng_reserve(draws_) : 0);
  std::vector<Tensor> all = root_values(v);
  {
    DonationScope scope(dying(caps, held));
    PlanScope plan(plan_.get(), [&v](int32_t r) { return v.node(r); });
    eval(all);
  }
  release(v);
  return results(v);
}

uint64_t layout_signature(const std::vector<Tensor>& tensors) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const Tensor& t : tensors) {
    const Node* n = t.node();
    h = mix(h, static_cast<uint64_t>(n->dtype) | static_cast<uint64_t>(n->device.index + 1) << 8 |
                   static_cast<uint64_t>(n->device.type) << 24 |
                   static_cast<uint64_t>(n->requires_grad) << 32);
    h = mix(h, static_cast<uint64_t>(n->offset));
    for (size_t i = 0; i < n->shape.size(); ++i) {
      h = mix(h, static_cast<uint64_t>(n->shape[i]));
      h = mix(h, static_cast<uint64_t>(n->strides[i]));
    }
    h = mix(h, n->shape.size());
  }
  return h;
}

}  // namespace pyflame::runtime
