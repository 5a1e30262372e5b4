// The fusion pass: between ordering and evaluation, groups elementwise nodes
// into fused regions (see ir/fused.h and docs/design/fusion.md).
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/fused.h"

namespace pyflame::fuse {

// Indexed by position in the order the plan was made from (empty vectors:
// no region).
struct Plan {
  std::vector<FusedRegion> regions;
  std::vector<int> root;  // the region the node at each position is the output of, or -1
  // Nodes a region computes without writing them out: its interior members
  // and the constants it takes as scalars. The eval loop skips them.
  std::vector<char> replaced;
  int region_at(size_t i) const { return root.empty() ? -1 : root[i]; }
  bool is_replaced(size_t i) const { return !replaced.empty() && replaced[i]; }
};

// `order`: the pending nodes of one evaluation, inputs first, each held once
// by the vector itself (that reference is discounted when checking that no
// one outside a region holds a node).
Plan plan(const std::vector<std::shared_ptr<Node>>& order);

bool enabled();

// The generated GPU source of every region evaluating `outputs` would form
// now, as (kernel name, source) pairs: what CI's AMD compile check builds.
std::vector<std::pair<std::string, std::string>> region_sources(const std::vector<Tensor>& outputs, int wave_size);

void set_enabled(bool on);
// GPU regions too: off by default (experimental, see docs/design/fusion.md).
bool gpu_enabled();
void set_gpu_enabled(bool on);

struct Counters {
  std::atomic<uint64_t> regions{0}, fallbacks{0}, compiles{0}, disk_hits{0}, memory_hits{0};
};
Counters& counters();

}  // namespace pyflame::fuse
