// Grouping, in reverse topological order: each pending elementwise node not
// yet taken starts a region as its output, then pulls in producers while they
// qualify. A producer joins as an interior value only when every reference to
// it comes from the region's members (no user handle, no consumer outside, no
// view of it) and no member keeps its inputs for backward: then its value is
// never observed outside the region and need not be written. A region whose
// output records gradients (requires_grad) keeps every value: its members
// join as stored outputs only, since each keeps its inputs for backward and
// some backward rules read their own output. Its gain is the launches and
// the reads between the members.
#include "ir/passes/fuse.h"

#include <algorithm>
#include <sstream>

#include "ir/node_map.h"
#include "ir/passes/fuse_source.h"
#include "pyflame/fusion.h"
#include "runtime/settings.h"

namespace pyflame {

int FusedRegion::ops() const {
  int n = 0;
  for (const auto& s : steps) n += s.kind != FusedStep::Kind::Load && s.kind != FusedStep::Kind::Scalar;
  return n;
}

namespace {

std::string step_name(const FusedStep& s) {
  switch (s.kind) {
    case FusedStep::Kind::Unary: return unary_name(UnaryOp(s.op));
    case FusedStep::Kind::Binary: return binary_name(BinaryOp(s.op));
    case FusedStep::Kind::Where: return "where";
    case FusedStep::Kind::Cast: return "astype";
    case FusedStep::Kind::Load: return std::string("x").append(std::to_string(s.slot));
    case FusedStep::Kind::Scalar: return std::string("s").append(std::to_string(s.slot));
  }
  return "?";
}

}  // namespace

std::string FusedRegion::signature() const {
  // Raw bytes rather than text: the GPU builds this key on every evaluation of a region.
  std::string k;
  k.reserve(16 + steps.size() * 20 + output_steps.size() * sizeof(int));
  auto put = [&k](const auto& v) { k.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(int(steps.size()));
  for (const auto& s : steps) {
    put(s.kind);
    put(s.op);
    put(s.dtype);
    put(s.a);
    put(s.b);
    put(s.c);
    put(s.slot);
  }
  put(int(output_steps.size()));
  for (int i : output_steps) put(i);
  put(reduce ? int(reduce_op) : -1);
  return k;
}

std::string FusedRegion::describe() const {
  std::vector<std::string> text(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    const FusedStep& s = steps[i];
    std::string t = step_name(s);
    if (s.a >= 0) {
      t += "(" + text[s.a];
      if (s.b >= 0) t += ", " + text[s.b];
      if (s.c >= 0) t += ", " + text[s.c];
      t += ")";
    }
    if (s.kind == FusedStep::Kind::Cast) t += "->" + std::string(dtype_name(s.dtype));
    text[i] = t;
  }
  if (text.empty()) return "";
  std::string d = text.back();
  if (reduce) {
    d = std::string(Reduce(reduce_op, reduce_axes).name()) + "(" + d + ", axes=";
    for (size_t i = 0; i < reduce_axes.size(); ++i) d += (i ? "," : "") + std::to_string(reduce_axes[i]);
    d += ")";
  }
  // Stored interior values: "  [+ stores mul(x0, s0)]".
  for (size_t k = 0; k + 1 < output_steps.size(); ++k) d += " [+ stores " + text[output_steps[k]] + "]";
  return d;
}

namespace fuse {

namespace {

constexpr int kMaxOps = 48;    // compute steps per region
constexpr int kMaxLoads = 12;  // external inputs per region (kernel argument size)
constexpr int kMaxOutputs = 8; // values stored per region, the output included

std::atomic<bool> g_enabled{settings::fusion()};
std::atomic<bool> g_gpu{settings::fusion_gpu()};

// p as a T when its family says it is one (no dynamic_cast: see
// Primitive::family).
template <class T>
const T* as(const Primitive* p, Primitive::Family f) {
  return p && p->family() == f ? static_cast<const T*>(p) : nullptr;
}
using F = Primitive::Family;

// Elementwise primitives a region can compute, with the same errors left to
// the unfused kernels (integer pow checks its exponents; unary ops reject
// some dtypes).
bool computable(const Node* n) {
  const Primitive* p = n->prim.get();
  if (!p || n->buffer) return false;
  if (!n->device.is_cpu() && !g_gpu.load(std::memory_order_relaxed)) return false;
  if (auto* u = as<Unary>(p, F::Unary)) {
    if (n->dtype == Dtype::Bool) return false;
    return !is_integral(n->dtype) || u->op == UnaryOp::Neg || u->op == UnaryOp::Abs || u->op == UnaryOp::Relu;
  }
  if (auto* b = as<Binary>(p, F::Binary)) {
    const Dtype t = n->inputs[0].dtype();
    return !(b->op == BinaryOp::Pow && is_integral(t) && t != Dtype::Bool);
  }
  return p->family() == F::Where || p->family() == F::AsType;
}

// Reductions a region may end in on this device: the elements of each
// output one row-major range of the region's index space (trailing axes; on
// the CPU leading ones too), read in the unfused kernel's order.
bool anchor_axes(const std::vector<int>& axes, int ndim, const Device& d) {
  if (axes.empty()) return false;
  bool trailing = true, leading = true;
  for (size_t i = 0; i < axes.size(); ++i) {
    trailing &= axes[i] == ndim - int(axes.size()) + int(i);
    leading &= axes[i] == int(i);
  }
  return trailing || (leading && d.is_cpu());
}

// The GPU's generated reductions accumulate in float, as the prebuilt ones
// do for these dtypes; the CPU reduces every dtype.
bool anchor_dtype(Dtype t, const Device& d) {
  return d.is_cpu() || t == Dtype::Float32 || t == Dtype::Float16 || t == Dtype::BFloat16;
}

// The value of a constant: a Full without inputs, seen through any views.
const Node* constant_of(const Node* n) {
  while (n->prim && n->prim->is_view() && !n->buffer) n = n->inputs[0].node();
  if (n->buffer || n->inputs.size() || !as<Full>(n->prim.get(), F::Full)) return nullptr;
  return n;
}

// The node owning the memory a load reads (through views).
const Node* load_base(const Node* p) {
  while (p->prim && p->prim->is_view() && !p->inputs.empty()) p = p->inputs[0].node();
  return p;
}
// Whether two loads read the same values: the same memory, layout and
// dtype (two views of one buffer are one load).
bool same_load(const Node* a, const Node* b) {
  return a == b || (a->offset == b->offset && a->dtype == b->dtype && a->strides == b->strides &&
                    load_base(a) == load_base(b));
}

struct Builder {
  const std::vector<std::shared_ptr<Node>>& order;
  // Per node of the order, by position. Flat arrays and one pointer map:
  // the plan runs on every evaluation (eager code, each compiled call).
  NodeMap<int> pos;  // position in the order
  // Consumers within the order of the node at position i:
  // cons[i ? cons_end[i - 1] : 0 .. cons_end[i]).
  std::vector<int> cons_end, cons;
  struct Info {
    int at = -1;  // where it is evaluated once placed (-1: not yet): a
                  // region's members at its output's position, else its own
    char taken = 0, comp = 0;  // comp: computable()
  };
  std::vector<Info> info;
  Plan plan;
  bool interior_only = false;  // growing a reduction's prologue: nothing stored

  explicit Builder(const std::vector<std::shared_ptr<Node>>& o) : order(o), cons_end(o.size(), 0), info(o.size()) {
    const size_t n = o.size();
    plan.root.assign(n, -1);
    plan.replaced.assign(n, 0);
    pos.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      pos.insert(o[i].get(), int(i));
      info[i].comp = computable(o[i].get());
    }
    // Counts, prefix sums (cons_end[p]: where p's range ends), then each
    // consumer placed backwards from its range's end, which leaves
    // cons_end[p] at p's start; shifted back to ends below.
    for (size_t i = 0; i < n; ++i) {
      for (const Tensor& t : o[i]->inputs) {
        if (const int* p = pos.find(t.node())) ++cons_end[*p];
      }
    }
    int total = 0;
    for (size_t i = 0; i < n; ++i) cons_end[i] = total += cons_end[i];
    cons.resize(total);
    for (size_t i = n; i-- > 0;) {
      for (const Tensor& t : o[i]->inputs) {
        if (const int* p = pos.find(t.node())) cons[--cons_end[*p]] = int(i);
      }
    }
    for (size_t i = 0; i < n; ++i) cons_end[i] = i + 1 < n ? cons_end[i + 1] : total;
  }

  int pos_of(const Node* n) const { return *pos.find(n); }  // n is in the order
  int pos_or(const Node* n) const {  // -1 outside the order
    const int* p = pos.find(n);
    return p ? *p : -1;
  }
  static bool has(const std::vector<Node*>& v, const Node* n) { return std::find(v.begin(), v.end(), n) != v.end(); }

  // References to n from outside `members`: all of its holders but the
  // order's own one and the members' input slots.
  static long outside_refs(const std::shared_ptr<Node>& n, const std::vector<Node*>& members) {
    long refs = n.use_count() - 1;
    for (const Node* m : members) {
      for (const Tensor& t : m->inputs) refs -= t.node() == n.get();
    }
    return refs;
  }

  enum class Join { No, Interior, Output };

  // Whether p joins the region: as an interior value when nothing outside
  // needs it, as a stored output when everything outside that needs it in
  // this evaluation runs after the region (at the output's position); holders
  // outside the evaluation (user handles, later graphs) read it afterwards.
  Join joins(const std::shared_ptr<Node>& p, const Node* root, const std::vector<Node*>& members) const {
    const int pp = pos_or(p.get());
    // A member recording gradients only under an output that does too (a
    // no_grad output over it would leave its stored value unwritten).
    if (pp < 0 || info[pp].taken || !info[pp].comp || (p->requires_grad && !root->requires_grad) ||
        p->shape != root->shape || p->device != root->device) {
      return Join::No;
    }
    if (!root->requires_grad && outside_refs(p, members) == 0) return Join::Interior;
    if (interior_only) return Join::No;
    const int root_at = pos_of(root);
    for (int k = pp ? cons_end[pp - 1] : 0; k < cons_end[pp]; ++k) {
      const int c = cons[k];
      if (has(members, order[c].get())) continue;
      // Nodes after the output were all placed already; an unplaced one
      // before it runs before the region.
      const int c_at = info[c].at >= 0 ? info[c].at : c;
      if (c_at <= root_at) return Join::No;
    }
    return Join::Output;
  }

  // Distinct external inputs of the members (constants aside). Called for
  // every candidate while a region grows: linear scans over a few dozen
  // members and loads, no hashing or allocation.
  static int count_loads(const std::vector<Node*>& members) {
    const Node* loads[kMaxLoads + 1];
    int n = 0;
    for (const Node* m : members) {
      for (const Tensor& t : m->inputs) {
        const Node* p = t.node();
        if (has(members, p) || constant_of(p)) continue;
        if (std::none_of(loads, loads + n, [&](const Node* q) { return same_load(p, q); })) {
          if (n == kMaxLoads) return n + 1;  // over: the exact count does not matter
          loads[n++] = p;
        }
      }
    }
    return n;
  }

  void sort_by_pos(std::vector<Node*>& v) const {
    std::sort(v.begin(), v.end(), [&](Node* a, Node* b) { return pos_of(a) < pos_of(b); });
  }

  // Scratch of grow(), reused: most nodes tried form no region.
  std::vector<Node*> members_, stored_;

  // The region's members (members_); `stored` (stored_) gets those also
  // needed outside.
  std::vector<Node*>& grow(Node* root, std::vector<Node*>& stored) {
    std::vector<Node*>& members = members_;
    members.assign(1, root);
    stored.clear();
    // An upper bound of the members' loads: a joining node adds at most its
    // inputs, so the exact count (quadratic in the members) is taken only
    // when the bound could pass the limit.
    int loads_bound = int(root->inputs.size());
    for (bool changed = true; changed && int(members.size()) < kMaxOps;) {
      changed = false;
      for (size_t i = 0; i < members.size() && int(members.size()) < kMaxOps; ++i) {
        for (size_t k = 0; k < members[i]->inputs.size(); ++k) {
          const std::shared_ptr<Node>& p = members[i]->inputs[k].node_ptr();
          const Join j = joins(p, root, members);
          if (j == Join::No || (j == Join::Output && int(stored.size()) + 1 >= kMaxOutputs)) continue;
          members.push_back(p.get());
          loads_bound += int(p->inputs.size());
          if (loads_bound > kMaxLoads && (loads_bound = count_loads(members)) > kMaxLoads) {
            members.pop_back();  // full: the region ends here
            loads_bound = count_loads(members);
            continue;
          }
          if (j == Join::Output) stored.push_back(p.get());
          info[pos_of(p.get())].taken = 1;
          changed = true;
          if (int(members.size()) == kMaxOps) break;
        }
      }
    }
    sort_by_pos(members);
    return members;
  }

  // Marks a constant's view chain replaced while each link is held only by
  // the one before it (else the link is evaluated as usual). `head` is an
  // entry of the region's constants list, which holds one reference itself.
  void replace_chain(const std::shared_ptr<Node>& head, FusedRegion& r) {
    const int hp = pos_or(head.get());
    if (hp < 0 || plan.replaced[hp] || outside_refs(head, r.members) != 1) return;
    plan.replaced[hp] = 1;
    r.unfused_order.push_back(head.get());
    for (const std::shared_ptr<Node>* n = &head; (*n)->prim && (*n)->prim->is_view();) {
      const std::shared_ptr<Node>& next = (*n)->inputs[0].node_ptr();
      const int np = pos_or(next.get());
      if (np < 0 || next.use_count() - 1 != 1) return;
      plan.replaced[np] = 1;
      r.unfused_order.push_back(next.get());
      n = &next;
    }
  }

  // The region's tape; `constants` gets the view chains of its scalars.
  // `steps` gets each member's step.
  FusedRegion tape(const std::vector<Node*>& members, std::vector<std::shared_ptr<Node>>& constants,
                   std::vector<int>& steps) {
    FusedRegion r;
    r.shape = members.back()->shape;
    r.device = members.back()->device;
    r.members = members;
    // At most three operands per member: room for every step up front.
    r.steps.reserve(4 * members.size());
    r.loads.reserve(kMaxLoads + 1);
    NodeMap<int> step_of;
    std::vector<std::pair<const Node*, int>> load_step;  // a load's node (one per load key) and step
    load_step.reserve(kMaxLoads + 1);
    // A number (a Full's value or a Binary's scalar operand): a kernel
    // argument, never part of the generated source.
    auto scalar = [&](double v, Dtype t) {
      FusedStep s;
      s.kind = FusedStep::Kind::Scalar;
      s.dtype = t;
      s.slot = int(r.scalars.size());
      r.scalars.push_back(v);
      r.steps.push_back(s);
      return int(r.steps.size()) - 1;
    };
    auto operand = [&](const Tensor& t) {
      const Node* p = t.node();
      if (const int* st = step_of.find(p)) return *st;
      FusedStep s;
      s.dtype = p->dtype;
      if (const Node* c = constant_of(p)) {
        constants.push_back(t.node_ptr());
        return step_of[p] = scalar(static_cast<const Full*>(c->prim.get())->value, p->dtype);
      }
      for (const auto& [q, k] : load_step) {
        if (same_load(p, q)) return step_of[p] = k;  // the same memory through another view node
      }
      s.kind = FusedStep::Kind::Load;
      s.slot = int(r.loads.size());
      r.loads.push_back(t.node());
      load_step.emplace_back(p, int(r.steps.size()));
      r.steps.push_back(s);
      return step_of[p] = int(r.steps.size()) - 1;
    };
    for (Node* m : members) {
      FusedStep s;
      s.dtype = m->dtype;
      const Primitive* p = m->prim.get();
      if (auto* u = as<Unary>(p, F::Unary)) {
        s.kind = FusedStep::Kind::Unary;
        s.op = uint8_t(u->op);
      } else if (auto* b = as<Binary>(p, F::Binary)) {
        s.kind = FusedStep::Kind::Binary;
        s.op = uint8_t(b->op);
        if (b->has_scalar()) {  // the number becomes a scalar slot on its side
          const int x = operand(m->inputs[0]);
          const int k = scalar(b->scalar, m->inputs[0].dtype());
          s.a = b->scalar_side == 0 ? k : x;
          s.b = b->scalar_side == 0 ? x : k;
          r.steps.push_back(s);
          step_of[m] = int(r.steps.size()) - 1;
          continue;
        }
      } else if (p->family() == F::Where) {
        s.kind = FusedStep::Kind::Where;
      } else {
        s.kind = FusedStep::Kind::Cast;
      }
      int ops[3] = {-1, -1, -1};
      for (size_t i = 0; i < m->inputs.size() && i < 3; ++i) ops[i] = operand(m->inputs[i]);
      s.a = ops[0], s.b = ops[1], s.c = ops[2];
      r.steps.push_back(s);
      step_of[m] = int(r.steps.size()) - 1;
    }
    for (const Node* m : members) steps.push_back(*step_of.find(m));
    return r;
  }

  // The elementwise producer a Reduce node can take as its prologue: its
  // only holder is the reduction, and the reduction's layout is one the
  // fused kernels read in the unfused order.
  Node* prologue(Node* n) const {
    const auto* red = as<Reduce>(n->prim.get(), F::Reduce);
    if (!red || red->op == ReduceOp::Prod || n->buffer || n->requires_grad || n->inputs.size() != 1) return nullptr;
    const std::shared_ptr<Node>& p = n->inputs[0].node_ptr();
    const int pp = pos_or(p.get());
    if (pp < 0 || info[pp].taken || !info[pp].comp || p->requires_grad || p->device != n->device ||
        !anchor_dtype(p->dtype, p->device) || outside_refs(p, {n}) != 0 ||
        !anchor_axes(red->axes, int(p->shape.size()), p->device)) {
      return nullptr;
    }
    return p.get();
  }

  // A region computing a reduction's input without writing it.
  void anchor(Node* n, Node* p) {
    const int np = pos_of(n);
    info[np].taken = 1;
    info[pos_of(p)].taken = 1;
    std::vector<Node*>& stored = stored_;
    interior_only = true;
    std::vector<Node*>& members = grow(p, stored);
    interior_only = false;
    std::vector<std::shared_ptr<Node>> constants;
    std::vector<int> steps;
    FusedRegion r = tape(members, constants, steps);
    if (int(r.loads.size()) > kMaxLoads) {
      for (Node* m : members) info[pos_of(m)].taken = 0;
      return;
    }
    const auto* red = static_cast<const Reduce*>(n->prim.get());
    r.reduce = true;
    r.reduce_op = red->op;
    r.reduce_axes = red->axes;
    r.outputs = {n};
    r.output_steps = {int(r.steps.size()) - 1};
    for (Node* m : members) {
      plan.replaced[pos_of(m)] = 1;
      info[pos_of(m)].at = np;
    }
    r.unfused_order = members;
    r.unfused_order.push_back(n);
    for (const auto& c : constants) replace_chain(c, r);
    sort_by_pos(r.unfused_order);
    plan.root[np] = int(plan.regions.size());
    plan.regions.push_back(std::move(r));
  }

  void run() {
    for (int i = int(order.size()) - 1; i >= 0; --i) {
      Node* n = order[i].get();
      if (info[i].at < 0) info[i].at = i;  // unless a later region took it
      if (info[i].taken) continue;
      if (Node* p = prologue(n)) {
        anchor(n, p);
        continue;
      }
      if (!info[i].comp) continue;
      info[i].taken = 1;
      std::vector<Node*>& stored = stored_;
      std::vector<Node*>& members = grow(n, stored);
      if (members.size() < 2) continue;
      std::vector<std::shared_ptr<Node>> constants;
      std::vector<int> steps;
      FusedRegion r = tape(members, constants, steps);
      if (int(r.loads.size()) > kMaxLoads) {  // rare: give the producers back
        for (Node* m : members) {
          if (m != n) info[pos_of(m)].taken = 0;
        }
        continue;
      }
      for (Node* m : members) {
        if (m != n) plan.replaced[pos_of(m)] = 1;
        info[pos_of(m)].at = i;
      }
      // Outputs in tape order, the region's output last.
      for (size_t k = 0; k < members.size(); ++k) {
        if (has(stored, members[k]) || members[k] == n) {
          r.outputs.push_back(members[k]);
          r.output_steps.push_back(steps[k]);
        }
      }
      r.unfused_order = members;
      for (const auto& c : constants) replace_chain(c, r);
      sort_by_pos(r.unfused_order);
      plan.root[i] = int(plan.regions.size());
      plan.regions.push_back(std::move(r));
    }
  }
};

}  // namespace

Plan plan(const std::vector<std::shared_ptr<Node>>& order) {
  if (order.size() < 2) return {};  // a region takes two nodes at least (eager code: one)
  // Nothing a region could compute (GPU graphs while GPU fusion is off, a
  // lone matmul with its views): no maps to build.
  if (std::none_of(order.begin(), order.end(), [](const auto& n) { return computable(n.get()); })) return {};
  counters().plans.fetch_add(1, std::memory_order_relaxed);
  Builder b(order);
  b.run();
  if (b.plan.regions.empty()) return {};
  return std::move(b.plan);
}

namespace {

bool holds(const std::vector<Node*>& v, const Node* n) { return std::find(v.begin(), v.end(), n) != v.end(); }

}  // namespace

std::optional<KeptPlan> KeptPlan::make(const std::vector<std::shared_ptr<Node>>& order,
                                       const std::function<int32_t(const Node*)>& index) {
  KeptPlan k;
  k.fusion = enabled();
  k.gpu = gpu_enabled();
  k.order.reserve(order.size());
  NodeMap<char> in_order;
  for (const auto& n : order) {
    const int32_t v = index(n.get());
    if (v < 0) return std::nullopt;
    k.order.push_back(v);
    in_order.insert(n.get(), 1);
  }
  if (k.fusion) k.plan = fuse::plan(order);
  // Where a load's views lead to outside the order: the value a new
  // recording reads through the same views.
  auto base = [&](const Node* p) {
    while (in_order.contains(p) && p->prim && p->prim->is_view() && !p->inputs.empty()) p = p->inputs[0].node();
    return p;
  };
  auto indices = [&](std::vector<Node*>& nodes, std::vector<int32_t>& out) {
    for (Node*& n : nodes) {
      out.push_back(index(n));
      n = nullptr;  // the planning recording's: gone after it
    }
    return std::none_of(out.begin(), out.end(), [](int32_t v) { return v < 0; });
  };
  for (FusedRegion& r : k.plan.regions) {
    // A member's input the tape reads as a constant or through another
    // node's load must be read so in every recording: a constant made in
    // the order, a load of the same value through the order's own views
    // (not two arguments that happen to alias now).
    for (const Node* m : r.members) {
      for (const Tensor& t : m->inputs) {
        const Node* p = t.node();
        if (holds(r.members, p) || holds(r.loads, p)) continue;
        if (constant_of(p)) {
          if (!in_order.contains(p)) return std::nullopt;
          continue;
        }
        auto q = std::find_if(r.loads.begin(), r.loads.end(), [&](const Node* l) { return same_load(p, l); });
        if (q == r.loads.end() || base(p) != base(*q)) return std::nullopt;
      }
    }
    Nodes nodes;
    if (!indices(r.loads, nodes.loads) || !indices(r.members, nodes.members) ||
        !indices(r.outputs, nodes.outputs) || !indices(r.unfused_order, nodes.unfused)) {
      return std::nullopt;
    }
    k.nodes.push_back(std::move(nodes));
  }
  return k;
}

bool KeptPlan::bind(const std::vector<std::shared_ptr<Node>>& now, const std::function<Node*(int32_t)>& node,
                    Plan& into) const {
  if (fusion != enabled() || gpu != gpu_enabled() || now.size() != order.size()) return false;
  for (size_t i = 0; i < now.size(); ++i) {
    if (now[i].get() != node(order[i])) return false;
  }
  into = plan;
  auto set = [&](std::vector<Node*>& to, const std::vector<int32_t>& from) {
    for (size_t j = 0; j < to.size(); ++j) to[j] = node(from[j]);
  };
  for (size_t k = 0; k < into.regions.size(); ++k) {
    FusedRegion& r = into.regions[k];
    set(r.loads, nodes[k].loads);
    set(r.members, nodes[k].members);
    set(r.outputs, nodes[k].outputs);
    set(r.unfused_order, nodes[k].unfused);
  }
  return true;
}

bool enabled() { return g_enabled.load(std::memory_order_relaxed); }
void set_enabled(bool on) { g_enabled.store(on); }
bool gpu_enabled() { return g_gpu.load(std::memory_order_relaxed); }
void set_gpu_enabled(bool on) { g_gpu.store(on); }

Counters& counters() {
  static Counters c;
  return c;
}

}  // namespace fuse
}  // namespace pyflame

// ---- the public switches (pyflame/fusion.h) ----
namespace pyflame {

namespace fuse {

std::vector<std::shared_ptr<Node>> pending_order(const std::vector<Tensor>& outputs) {
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<Node*> seen;
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack;
  for (const Tensor& t : outputs) {
    if (!t.defined() || t.node()->buffer || !seen.insert(t.node()).second) continue;
    stack.emplace_back(t.node_ptr(), 0);
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->inputs.size()) {
        const std::shared_ptr<Node>& in = n->inputs[i++].node_ptr();
        if (!in->buffer && in->prim && seen.insert(in.get()).second) stack.emplace_back(in, 0);
      } else {
        order.push_back(std::move(n));
        stack.pop_back();
      }
    }
  }
  return order;
}

}  // namespace fuse

using fuse::pending_order;

const char* fused_op_name(FusedOpType t) {
  static const char* names[] = {"MATMUL_BIAS", "MATMUL_BIAS_RELU", "MATMUL_BIAS_GELU", "CONV_BIAS",
                                "CONV_BIAS_RELU", "CONV_BN_RELU", "ADD_RELU", "MUL_ADD"};
  return names[int(t)];
}

// Names as the ops are called ("conv2d", "batch_norm", "gelu"); "linear"
// counts as matmul + add.
std::optional<FusedOpType> can_fuse(const std::vector<std::string>& ops) {
  std::vector<std::string> o;
  for (const auto& s : ops) {
    if (s == "linear") {
      o.insert(o.end(), {"matmul", "add"});
    } else {
      o.push_back(s == "conv" || s == "conv1d" || s == "conv2d" ? "conv" : s);
    }
  }
  auto is = [&](std::initializer_list<const char*> want) {
    return o.size() == want.size() && std::equal(o.begin(), o.end(), want.begin());
  };
  if (is({"matmul", "add"})) return FusedOpType::MATMUL_BIAS;
  if (is({"matmul", "add", "relu"})) return FusedOpType::MATMUL_BIAS_RELU;
  if (is({"matmul", "add", "gelu"}) || is({"matmul", "add", "gelu_tanh"})) return FusedOpType::MATMUL_BIAS_GELU;
  if (is({"conv", "add"})) return FusedOpType::CONV_BIAS;
  if (is({"conv", "add", "relu"})) return FusedOpType::CONV_BIAS_RELU;
  if (is({"conv", "batch_norm", "relu"})) return FusedOpType::CONV_BN_RELU;
  if (is({"add", "relu"})) return FusedOpType::ADD_RELU;
  if (is({"mul", "add"})) return FusedOpType::MUL_ADD;
  return std::nullopt;
}

void set_fusion(bool on) { fuse::set_enabled(on); }
bool get_fusion() { return fuse::enabled(); }
void set_fusion_gpu(bool on) { fuse::set_gpu_enabled(on); }
bool get_fusion_gpu() { return fuse::gpu_enabled(); }

std::string explain(const std::vector<Tensor>& outputs) {
  std::vector<std::shared_ptr<Node>> order = pending_order(outputs);
  fuse::Plan plan = fuse::enabled() ? fuse::plan(order) : fuse::Plan{};
  std::ostringstream os;
  os << "plan: " << order.size() << " pending node(s), fusion " << (fuse::enabled() ? "on" : "off") << "\n";
  for (size_t i = 0; i < order.size(); ++i) {
    const std::shared_ptr<Node>& n = order[i];
    if (plan.is_replaced(i)) continue;
    if (const int region = plan.region_at(i); region >= 0) {
      const FusedRegion& r = plan.regions[region];
      os << "  fused[" << r.ops() << " ops, " << r.loads.size() << " loads, " << r.scalars.size()
         << " scalars" << (r.outputs.size() > 1 ? ", " + std::to_string(r.outputs.size()) + " outputs" : "")
         << "] " << r.describe() << " -> " << dtype_name(n->dtype) << shape_str(n->shape) << " on "
         << n->device.str() << ": " << fused_kernel_name(r) << "\n";
    } else if (n->prim) {
      os << "  " << n->prim->name() << " -> " << dtype_name(n->dtype) << shape_str(n->shape)
         << (n->prim->is_view() ? " (view)" : "") << "\n";
    }
  }
  return os.str();
}

namespace fuse {
std::vector<std::pair<std::string, std::string>> region_sources(const std::vector<Tensor>& outputs, int wave_size) {
  std::vector<std::shared_ptr<Node>> order = pending_order(outputs);
  Plan plan = fuse::plan(order);
  std::vector<std::pair<std::string, std::string>> out;
  for (const FusedRegion& r : plan.regions) {
    KernelSource ks = kernel_source(r, kernel_layout(r), wave_size);
    out.emplace_back(ks.name, ks.source);
  }
  return out;
}
}  // namespace fuse

FusionStats fusion_stats() {
  auto& c = fuse::counters();
  return {c.regions.load(),   c.fallbacks.load(),   c.compiles.load(),
          c.disk_hits.load(), c.memory_hits.load(), c.gemm_epilogues.load()};
}

void reset_fusion_stats() {
  auto& c = fuse::counters();
  c.regions = c.fallbacks = c.compiles = c.disk_hits = c.memory_hits = c.plans = c.gemm_epilogues = 0;
}

}  // namespace pyflame
