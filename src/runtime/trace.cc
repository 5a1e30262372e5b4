#include "runtime/trace.h"

#include <algorithm>

#include "pyflame/errors.h"

namespace pyflame::runtime {

namespace {
thread_local Trace* t_trace = nullptr;
}

Trace* active_trace() { return t_trace; }

TraceScope::TraceScope(Trace& t) {
  if (t_trace) throw RuntimeError("[compile] a compiled function cannot be traced inside another's trace");
  t.first_id = next_node_id();
  t.rng_start = rng_counter();
  t_trace = &t;
}

TraceScope::~TraceScope() {
  t_trace->rng_end = rng_counter();
  t_trace = nullptr;
}

void trace_grad_read(const std::shared_ptr<Node>& owner, const std::shared_ptr<Node>& grad) {
  Trace* t = t_trace;
  if (!t || t->recorded(owner.get())) return;
  for (const auto& [n, g] : t->grad_reads) {
    if (n == owner) return;  // the first read is what the trace assumed
  }
  // A slot the function wrote first holds what the function put there.
  if (std::find(t->grad_writes.begin(), t->grad_writes.end(), owner) != t->grad_writes.end()) return;
  t->grad_reads.emplace_back(owner, grad);
}

void trace_grad_write(const std::shared_ptr<Node>& owner) {
  Trace* t = t_trace;
  if (!t || t->recorded(owner.get())) return;
  if (std::find(t->grad_writes.begin(), t->grad_writes.end(), owner) == t->grad_writes.end()) {
    t->grad_writes.push_back(owner);
  }
}

void trace_host_read(const char* what) {
  Trace* t = t_trace;
  if (t && t->host_read.empty()) t->host_read = what;
}

bool trace_keeps(const Node* n) {
  const Trace* t = t_trace;
  return t && t->recorded(n);
}

}  // namespace pyflame::runtime
