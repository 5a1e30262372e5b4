// A replay's kept fusion plan (fuse::KeptPlan, docs/design/replay.md).
// While a PlanScope is active on this thread, an evaluation whose order is
// the one the plan was made for takes it instead of planning again (eval.cc,
// make_plan); any other evaluation plans as usual.
#pragma once
#include <functional>

#include "ir/passes/fuse.h"

namespace pyflame::runtime {

class PlanScope {
 public:
  // node(v): the replay's node for the plan's value v.
  PlanScope(const fuse::KeptPlan* kept, std::function<Node*(int32_t)> node);
  ~PlanScope();
  PlanScope(const PlanScope&) = delete;
  PlanScope& operator=(const PlanScope&) = delete;

  // Into `into`, the kept plan for an order, if it is the one (see
  // KeptPlan::bind).
  static bool bind(const std::vector<std::shared_ptr<Node>>& order, fuse::Plan& into);

 private:
  const fuse::KeptPlan* kept_;
  std::function<Node*(int32_t)> node_;
  const PlanScope* prev_;
};

}  // namespace pyflame::runtime
