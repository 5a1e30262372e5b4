// The eval loop: a topological order found without recursion, then each node
// evaluated on its device's backend. A node drops its inputs once computed,
// so intermediates are freed as soon as their last consumer has run.
#include <unordered_set>

#include "ir/primitive.h"
#include "pyflame/backend/rocm.h"
#include "runtime/allocator.h"

namespace pyflame {

namespace {

std::vector<Node*> topo_order(const std::vector<Tensor>& outputs) {
  std::vector<Node*> order;
  std::unordered_set<Node*> seen;
  std::vector<std::pair<Node*, size_t>> stack;
  auto visit = [&](Node* n) {
    if (!n->buffer && seen.insert(n).second) stack.emplace_back(n, 0);
  };
  // One output at a time: an output may be an input of a later one.
  for (const auto& t : outputs) {
    visit(t.node());
    while (!stack.empty()) {
      auto [n, i] = stack.back();
      if (i < n->inputs.size()) {
        stack.back().second = i + 1;
        visit(n->inputs[i].node());
      } else {
        order.push_back(n);
        stack.pop_back();
      }
    }
  }
  return order;
}

void eval_node(Node* n) {
  if (n->prim->is_view()) {
    n->buffer = n->inputs[0].buffer();
    return;
  }
  // The eval functions take Tensor handles; this one borrows the node.
  Tensor out(std::shared_ptr<Node>(std::shared_ptr<Node>(), n));
  n->buffer = allocate(n->device, out.nbytes());
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

}  // namespace

void eval(const std::vector<Tensor>& outputs) {
  for (const auto& t : outputs) {
    if (!t.defined()) throw ValueError("[eval] undefined tensor");
  }
  backend::rocm::EvalStreams streams;  // multi_stream: this evaluation's own streams
  for (Node* n : topo_order(outputs)) {
    if (!n->prim) throw RuntimeError("[eval] leaf tensor without data");
    eval_node(n);
    if (!n->requires_grad || n->grad_leaf) {
      n->inputs.clear();
      n->prim.reset();
    }
  }
  streams.finish();
}

}  // namespace pyflame
