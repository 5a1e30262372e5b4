// Tracing a function for replay (pf.compile, docs/design/replay.md): while a
// Trace is active on a thread, everything that function records stays in
// the graph (evaluation keeps the primitives and inputs of the nodes it
// records, so a value computed mid-function still says how it was made),
// and the core notes what a replay must reproduce or cannot: the random
// draws, the .grad slots read and written, host reads.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "pyflame/tensor.h"

namespace pyflame::runtime {

struct Trace {
  uint64_t first_id = 0;        // nodes with id >= first_id were recorded by the trace
  uint64_t rng_start = 0;       // the random counter when the trace began
  uint64_t rng_end = 0;         // ... and when it ended
  std::unordered_map<uint64_t, uint64_t> keys;  // random key -> counter offset of its draw
  // .grad slots of nodes recorded before the trace: what was read (the
  // grad node or null, the first read only) and which ones were written.
  // Held for the trace's length only.
  std::vector<std::pair<std::shared_ptr<Node>, std::shared_ptr<Node>>> grad_reads;
  std::vector<std::shared_ptr<Node>> grad_writes;
  std::string host_read;  // the first host read of the trace ("" if none)

  bool recorded(const Node* n) const { return n->id >= first_id; }
};

// The trace active on this thread, or null.
Trace* active_trace();

// Makes `t` the active trace of this thread for its lifetime (not nested).
class TraceScope {
 public:
  explicit TraceScope(Trace& t);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;
};

// Hooks the core calls (cheap when no trace is active).
void trace_grad_read(const std::shared_ptr<Node>& owner, const std::shared_ptr<Node>& grad);
void trace_grad_write(const std::shared_ptr<Node>& owner);
void trace_host_read(const char* what);
// Whether evaluation keeps node n's primitive and inputs (a traced node).
bool trace_keeps(const Node* n);

// The random counter (src/ops/creation.cc): reserves n consecutive draws
// and returns the first one's counter; the key draw `counter` gets.
uint64_t rng_reserve(uint64_t n);
uint64_t rng_counter();
uint64_t rng_key(uint64_t counter);

}  // namespace pyflame::runtime
