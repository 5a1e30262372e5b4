// The eval loop: a topological order found without recursion, then each node
// evaluated on its device's backend. A node drops its inputs once computed,
// so intermediates are freed as soon as their last consumer has run.
//
// Threads may evaluate graphs that share nodes (see docs/design/threads.md).
// An evaluation claims each pending node it needs (Pending -> Running, one
// atomic exchange) while it orders them, computes what it claimed, and
// publishes the results (Running -> Done) once its streams have finished, so
// a reader on any stream sees complete data. Graphs that do not overlap never
// wait and take no lock. An evaluation that meets a node another one is
// running gives back all its claims, then waits for that node under one
// overlap mutex and tries again: a thread holding claims never waits, so no
// cycle of waits can form.
//
// On a GPU the evaluation runs inside a runtime::GpuEvaluation (the
// evaluation context, docs/design/eval_context.md): devices, streams and
// handles resolved once, range checks read at the end.
#include <exception>
#include <mutex>
#include <unordered_set>

#include "ir/node_map.h"
#include "ir/passes/fuse.h"
#include "ir/primitive.h"
#include "runtime/allocator.h"
#include "runtime/backend.h"
#include "runtime/donation.h"
#include "runtime/plan_scope.h"
#include "runtime/trace.h"

namespace pyflame {

namespace {

std::mutex g_overlap_mu;  // serializes evaluations that met another's claims

// Nodes are held weakly: running the order frees intermediates as it goes.
using NodeRef = std::weak_ptr<Node>;

struct Claims {
  std::vector<NodeRef> order;  // claimed by this evaluation, inputs first
  std::vector<std::shared_ptr<Node>> foreign;  // running in another evaluation: held while waited on
};

void set_state(Node* n, NodeState s) {
  n->state.store(s, std::memory_order_release);
  n->state.notify_all();
}

// Claims the pending nodes the outputs depend on, in topological order. A
// claimed node made with data is just marked done.
Claims claim_order(const std::vector<Tensor>& outputs) {
  Claims c;
  NodeSet seen;
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack;
  // Room for a small graph (a compiled call's): one allocation each, as
  // a single op takes, instead of one per doubling.
  c.order.reserve(16);
  stack.reserve(16);
  auto visit = [&](const std::shared_ptr<Node>& ptr) {
    Node* n = ptr.get();
    if (!seen.insert(n)) return;
    NodeState s = NodeState::Pending;
    if (n->state.compare_exchange_strong(s, NodeState::Running, std::memory_order_acquire)) {
      if (n->buffer) {
        set_state(n, NodeState::Done);
      } else {
        stack.emplace_back(ptr, 0);
      }
    } else if (s == NodeState::Running) {
      c.foreign.push_back(ptr);
    }
  };
  // One output at a time: an output may be an input of a later one.
  for (const auto& t : outputs) {
    visit(t.node_ptr());
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->inputs.size()) {
        visit(n->inputs[i++].node_ptr());  // may grow the stack: touch no reference after
      } else {
        c.order.push_back(n);
        stack.pop_back();
      }
    }
  }
  return c;
}

// Claims everything the outputs need, waiting out overlapping evaluations.
std::vector<NodeRef> claim_all(const std::vector<Tensor>& outputs) {
  std::unique_lock<std::mutex> overlap(g_overlap_mu, std::defer_lock);
  for (;;) {
    Claims c = claim_order(outputs);
    if (c.foreign.empty()) return std::move(c.order);
    for (const NodeRef& n : c.order) set_state(n.lock().get(), NodeState::Pending);
    if (!overlap.owns_lock()) overlap.lock();
    for (const auto& n : c.foreign) n->state.wait(NodeState::Running, std::memory_order_acquire);
  }
}

// Done where the node got its data, pending again where it did not (after an
// error), so a later evaluation can retry it.
// Intermediates freed by the run need nothing.
void publish(const std::vector<NodeRef>& order) {
  for (const NodeRef& ref : order) {
    if (auto n = ref.lock()) set_state(n.get(), n->buffer ? NodeState::Done : NodeState::Pending);
  }
}

// The buffer of the input a primitive may write in place (donor_input), when
// no one can observe that input after this node: only this node holds the
// input's node (no user handle, no other consumer) and only that node holds
// its buffer (no views), and the layouts and sizes match. Else null.
// Under a replay, references its DonationScope vouches for do not count.
std::shared_ptr<Buffer> donated_buffer(Node* n) {
  const int i = n->prim->donor_input();
  if (i < 0 || n->requires_grad) return nullptr;
  const std::shared_ptr<Node>& in = n->inputs[i].node_ptr();
  const runtime::KnownHolders known = runtime::known_holders(in.get());
  if (in.use_count() != 1 + known.nodes || !in->buffer || in->buffer.use_count() != 1 + known.buffers) {
    return nullptr;
  }
  if (in->offset != 0 || in->dtype != n->dtype || in->device != n->device || in->shape != n->shape ||
      in->strides != n->strides || in->buffer->bytes < shape_size(in->shape) * itemsize(in->dtype)) {
    return nullptr;
  }
  return in->buffer;
}

void eval_node(Node* n) {
  if (n->prim->is_view()) {
    n->buffer = n->inputs[0].buffer();
    return;
  }
  // The eval functions take Tensor handles; this one borrows the node.
  Tensor out(std::shared_ptr<Node>(std::shared_ptr<Node>(), n));
  n->buffer = donated_buffer(n);
  if (!n->buffer) n->buffer = allocate(n->device, out.nbytes());
  if (out.size() == 0) return;
  try {
    if (n->device.is_cpu()) {
      n->prim->eval_cpu(n->inputs, out);
    } else {
      n->prim->eval_gpu(n->inputs, out);
    }
  } catch (...) {
    n->buffer.reset();
    throw;
  }
}

// A borrowed handle to a node the caller keeps alive.
Tensor borrow(Node* n) { return Tensor(std::shared_ptr<Node>(std::shared_ptr<Node>(), n)); }

// After a node is evaluated it keeps only its data, unless backward reads its
// inputs (requires grad, not a leaf) or a replay program reads how it was made
// (traced).
void drop_recipe(Node* n) {
  if ((n->requires_grad && !n->grad_leaf) || runtime::trace_keeps(n)) return;
  n->inputs.clear();
  n->prim.reset();
}

// A fused region at its output node. Its members are all still alive and
// unevaluated (their only holders are the region's members, or for a stored
// member, holders that run after it), so a GPU region without a compiled
// kernel runs them one by one instead. A stored member then keeps only its
// data, as an evaluated node does.
void eval_region(const FusedRegion& r) {
  std::vector<Tensor> loads, outs;
  loads.reserve(r.loads.size());
  for (Node* p : r.loads) loads.push_back(borrow(p));
  for (Node* o : r.outputs) {
    outs.push_back(borrow(o));
    o->buffer = allocate(o->device, outs.back().nbytes());
  }
  auto drop = [&] {
    for (Node* o : r.outputs) o->buffer.reset();
  };
  try {
    if (outs.back().size() == 0) {
    } else if (r.device.is_cpu()) {
      eval_fused_cpu(r, loads, outs);
      fuse::counters().regions++;
    } else if (eval_fused_gpu(r, loads, outs)) {
      fuse::counters().regions++;
    } else {
      drop();
      fuse::counters().fallbacks++;
      for (Node* m : r.unfused_order) eval_node(m);
    }
  } catch (...) {
    drop();
    throw;
  }
  for (size_t k = 0; k + 1 < r.outputs.size(); ++k) drop_recipe(r.outputs[k]);
}

// The plan a replay binds its program's kept plan into (runtime/plan_scope.h),
// one per thread: its vectors keep their capacity from call to call, so a
// replay's plan costs no allocation. Busy while an evaluation uses it (an
// evaluation nested in it plans its own).
struct BoundPlan {
  fuse::Plan plan;
  bool busy = false;
};
thread_local BoundPlan t_bound;

// The fusion plan of the order, indexed as the order (holding each node
// only while planning): `own`, or this thread's bound plan for a replay's
// order (then busy until the caller releases it). Every claimed node is
// alive here (the outputs hold them); if one were not, the evaluation would
// simply run unfused.
const fuse::Plan& make_plan(const std::vector<NodeRef>& order, fuse::Plan& own) {
  if (!fuse::enabled() || order.size() < 2) return own;
  std::vector<std::shared_ptr<Node>> nodes;
  nodes.reserve(order.size());
  for (const NodeRef& ref : order) {
    nodes.push_back(ref.lock());
    if (!nodes.back()) return own;
  }
  if (!t_bound.busy && runtime::PlanScope::bind(nodes, t_bound.plan)) {
    t_bound.busy = true;
    return t_bound.plan;
  }
  own = fuse::plan(nodes);
  return own;
}

// Stands in for a node whose value a failed deferred check made invalid
// after the node had dropped its own primitive: evaluating it again raises
// the same error.
class Failed : public Primitive {
 public:
  explicit Failed(std::exception_ptr e) : error(std::move(e)) {}
  const char* name() const override { return "failed"; }
  PF_PARAMS(reinterpret_cast<uintptr_t>(this))
  void eval_cpu(const std::vector<Tensor>&, Tensor&) override { std::rethrow_exception(error); }
  void eval_gpu(const std::vector<Tensor>&, Tensor&) override { std::rethrow_exception(error); }
  std::exception_ptr error;
};

// The nodes whose values rest on a device check not read yet: the node
// whose kernel made it and everything computed from it.
struct Unchecked {
  std::unordered_set<Node*> nodes;
  void note(Node* n, bool made_check) {
    bool hit = made_check;
    for (size_t i = 0; !hit && i < n->inputs.size(); ++i) hit = nodes.count(n->inputs[i].node_ptr().get());
    if (hit) nodes.insert(n);
  }
};

// A device check failed at the end of the evaluation: every node that rests
// on it and that someone still holds loses its data, so it is pending again;
// one that kept its primitive recomputes (and meets the check again), one
// that dropped it raises the same error.
void invalidate(const std::vector<NodeRef>& order, const Unchecked& u, std::exception_ptr error) {
  for (const NodeRef& ref : order) {
    std::shared_ptr<Node> n = ref.lock();
    if (!n || !n->buffer || !u.nodes.count(n.get())) continue;
    n->buffer.reset();
    if (!n->prim) n->prim = std::make_shared<Failed>(error);
  }
}

// Every node of the order is alive when its turn comes: its consumers in
// this graph have not run yet, so they still hold it. Nodes a fused region
// replaces are skipped; they go with the region's output.
void run(const std::vector<NodeRef>& order) {
  runtime::GpuEvaluation gpu;  // this evaluation's devices, streams and checks
  Unchecked unchecked;
  fuse::Plan own;
  const fuse::Plan& plan = make_plan(order, own);
  struct Release {
    bool bound;
    ~Release() {
      if (bound) t_bound.busy = false;
    }
  } release{&plan == &t_bound.plan};
  // Reads the pending checks; a failed one invalidates what rests on it.
  auto finish = [&] {
    try {
      gpu.finish();
    } catch (...) {
      invalidate(order, unchecked, std::current_exception());
      throw;
    }
  };
  try {
    for (size_t i = 0; i < order.size(); ++i) {
      if (plan.is_replaced(i)) continue;
      std::shared_ptr<Node> n = order[i].lock();
      if (!n) continue;
      if (!n->prim) throw RuntimeError("[eval] leaf tensor without data");
      const size_t checks = gpu.checks_made();
      const int region = plan.region_at(i);
      if (region >= 0) {
        eval_region(plan.regions[region]);
      } else {
        eval_node(n.get());
      }
      const bool made_check = gpu.checks_made() != checks;
      if (made_check || !unchecked.nodes.empty()) {
        // A region's members (inputs first, the output last) carry the
        // check from its loads to its output.
        if (region >= 0) {
          const FusedRegion& r = plan.regions[region];
          for (Node* m : r.members) unchecked.note(m, made_check);
          if (r.reduce) unchecked.note(n.get(), made_check);  // the reduction after its prologue
        } else {
          unchecked.note(n.get(), made_check);
        }
      }
      drop_recipe(n.get());
    }
  } catch (...) {
    // A node failed after a device check was made: that check, if it
    // failed, is the cause (a kernel may have tripped over its bad data),
    // so it is the error raised; else the node's own.
    if (!unchecked.nodes.empty()) finish();
    throw;
  }
  finish();
}  // on an error the streams synchronize here, before anything is published

}  // namespace

void eval(const std::vector<Tensor>& outputs) {
  for (const auto& t : outputs) {
    if (!t.defined()) throw ValueError("[eval] undefined tensor");
  }
  std::vector<NodeRef> order = claim_all(outputs);
  try {
    run(order);
  } catch (...) {
    publish(order);
    throw;
  }
  publish(order);
}

}  // namespace pyflame

namespace pyflame::runtime {

namespace {
thread_local const std::vector<KnownHolders>* t_known = nullptr;
thread_local const PlanScope* t_plan = nullptr;
}

PlanScope::PlanScope(const fuse::KeptPlan* kept, std::function<Node*(int32_t)> node)
    : kept_(kept), node_(std::move(node)), prev_(t_plan) {
  t_plan = this;
}

PlanScope::~PlanScope() { t_plan = prev_; }

bool PlanScope::bind(const std::vector<std::shared_ptr<Node>>& order, fuse::Plan& into) {
  return t_plan && t_plan->kept_ && t_plan->kept_->bind(order, t_plan->node_, into);
}

DonationScope::DonationScope(std::vector<KnownHolders> known) : known_(std::move(known)), prev_(t_known) {
  t_known = &known_;
}

DonationScope::~DonationScope() { t_known = prev_; }

KnownHolders known_holders(const Node* n) {
  if (t_known) {
    for (const KnownHolders& k : *t_known) {
      if (k.node == n) return k;
    }
  }
  return {n, 0, 0};
}

}  // namespace pyflame::runtime
