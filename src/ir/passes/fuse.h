// The fusion pass: between ordering and evaluation, groups elementwise nodes
// into fused regions (see ir/fused.h and docs/design/fusion.md).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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

// The pending nodes `outputs` need, inputs first, in the order an
// evaluation claims them (no claims: a preview).
std::vector<std::shared_ptr<Node>> pending_order(const std::vector<Tensor>& outputs);

// The plan of a graph recorded again and again with one structure (a
// compiled function's program, runtime/program.h), made once when it is
// traced instead of at every call. Nodes are named by index (the program's
// value references): each position of the order it was made for, and each
// region's loads, members, outputs and replaced nodes. `bind` gives the plan
// of one recording, with that recording's nodes.
struct KeptPlan {
  bool fusion = false, gpu = false;  // the switches it was made under
  std::vector<int32_t> order;        // the value at each position
  Plan plan;  // its regions' node pointers are the planning recording's, never read
  struct Nodes {
    std::vector<int32_t> loads, members, outputs, unfused;
  };
  std::vector<Nodes> nodes;  // per region

  // Plans `order` now (as plan() would) and keeps it. `index(n)`: n's
  // value, -1 if the recording does not name it. Nothing when the plan
  // rests on what a new recording need not repeat: a node without a value,
  // or two values read as one load because they alias here.
  static std::optional<KeptPlan> make(const std::vector<std::shared_ptr<Node>>& order,
                                      const std::function<int32_t(const Node*)>& index);
  // Into `into`, the plan of a recording evaluated in `order`, `node(v)`
  // its node for value v (a plan reused from call to call keeps its
  // vectors' capacity: binding then allocates nothing). False when that is
  // not the order it was made for or a fusion switch has changed since
  // (the caller then plans as usual).
  bool bind(const std::vector<std::shared_ptr<Node>>& order, const std::function<Node*(int32_t)>& node,
            Plan& into) const;
};

// The generated GPU source of every region evaluating `outputs` would form
// now, as (kernel name, source) pairs: what CI's AMD compile check builds.
std::vector<std::pair<std::string, std::string>> region_sources(const std::vector<Tensor>& outputs, int wave_size);

void set_enabled(bool on);
// GPU regions too: off by default (experimental, see docs/design/fusion.md).
bool gpu_enabled();
void set_gpu_enabled(bool on);

struct Counters {
  std::atomic<uint64_t> regions{0}, fallbacks{0}, compiles{0}, disk_hits{0}, memory_hits{0};
  std::atomic<uint64_t> gemm_epilogues{0};  // FusedGemm nodes the library ran in one GEMM
  std::atomic<uint64_t> plans{0};  // orders planned that had something to fuse (tests)
};
Counters& counters();

}  // namespace pyflame::fuse
