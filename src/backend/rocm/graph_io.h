// A graph replay's copies in and out as kernel nodes of the graph itself,
// reading their pointers from a table in mapped host memory that the host
// fills before each launch: a replay then makes no copy call
// (docs/design/replay.md, "Copies in and out").
#pragma once
#include <cstdint>

#include "backend/rocm/gpu/runtime.h"

namespace pyflame::backend::rocm {

struct GraphCopy {
  void* dst;
  const void* src;
  uint64_t bytes;
};

// Adds to `graph`, after `deps`, one node copying table[0..n) as the table
// reads when the node runs; `max_bytes` (the largest copy) sizes its grid.
hipError_t add_graph_copies(hipGraph_t graph, const hipGraphNode_t* deps, size_t ndeps, const GraphCopy* table,
                            int n, uint64_t max_bytes, hipGraphNode_t* node);

}  // namespace pyflame::backend::rocm
