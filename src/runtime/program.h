// A traced function kept as a program (docs/design/replay.md): the nodes the
// trace recorded, in recording order, each as its primitive, layout and the
// values it reads. A value is one of the function's tensor arguments, a
// captured tensor (followed to its latest version through its Binding, so
// an optimizer step outside is seen), the .grad of one of those, a constant
// the trace made from host data, or an earlier step. Replaying records the
// same nodes over new arguments without running the function.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "pyflame/tensor.h"
#include "runtime/donation.h"
#include "runtime/trace.h"

namespace pyflame::fuse {
struct KeptPlan;
}

namespace pyflame::runtime {

class Program {
 public:
  // From a finished trace: `args` are the function's tensor arguments,
  // `outputs` its tensor results, `rebound` the values held at the end by
  // handles the function rebound (in-place updates of parameters, state).
  Program(const Trace& trace, const std::vector<Tensor>& args, const std::vector<Tensor>& outputs,
          const std::vector<Tensor>& rebound);

  struct Result {
    std::vector<Tensor> outputs, rebound;
  };
  // Records the program over new arguments (same layouts as the trace's),
  // evaluates the outputs, the rebound values and the gradients the trace
  // wrote, and writes those gradients. Nothing when something baked in no
  // longer holds (an argument's layout, a captured tensor gone or changed,
  // a .grad that was empty and is not, ...): the caller traces again.
  // `held`: what each live handle the program rebinds holds now (the
  // caller rebinds them to the results): a handle's old version that only
  // the replay and the handle hold dies with the step, so in-place writes
  // into it (put, slice_update) take its buffer (runtime/donation.h).
  std::optional<Result> replay(const std::vector<Tensor>& args, const std::vector<const Node*>& held = {}) const;

  size_t steps() const { return steps_.size(); }
  // Each step's primitive name, in order (the op count of a replay).
  std::vector<std::string> step_names() const;
  // Whether its replays launch a captured GPU graph now.
  bool captured() const;

 private:
  struct Layout {
    Shape shape;
    Strides strides;
    int64_t offset = 0;
    Dtype dtype = Dtype::Float32;
    Device device;
    bool requires_grad = false;
    static Layout of(const Node* n);
    bool matches(const Node* n) const;
  };
  struct Captured {
    std::shared_ptr<Binding> binding;  // a tensor made before the trace
    std::shared_ptr<Node> constant;    // data the trace made (host data)
    int32_t grad_of = -1;              // the .grad of this value
    Layout layout;
  };
  struct Step {
    std::shared_ptr<Primitive> prim;
    std::vector<int32_t> inputs;
    Layout layout;
    bool grad_leaf = false;
    bool released = false;  // backward() in the traced call walked and released it
    bool kept = false;      // read after the evaluation: a result, a gradient, released
    int64_t draw = -1;  // a random op: its draw's offset from the trace's first
  };
  struct GradRead {
    int32_t owner;  // whose .grad the function read ...
    bool defined;   // ... and whether it had one
  };
  struct GradWrite {
    int32_t owner, grad;  // grad -1: cleared
  };

  // A value: an argument, a captured tensor or a step, as kind and index.
  enum Kind : int32_t { Arg = 0, Cap = 1, Val = 2 };
  static int32_t ref(Kind k, int32_t i) { return (k << 28) | i; }

  // The values a replay reads: arguments, captured tensors and steps.
  // A replay holds only the steps it reads after evaluating (`kept`); the
  // others are held by the steps that read them, as eager code's
  // intermediates are, so fusion keeps them interior (never written).
  struct Values {
    const std::vector<Tensor>& args;
    const std::vector<Tensor>& caps;
    std::vector<Tensor> steps;  // empty where not kept
    std::vector<Node*> nodes;   // every step's node, alive while the evaluation runs
    const Tensor& operator()(int32_t r) const {
      switch (r >> 28) {
        case Arg: return args[r & 0xfffffff];
        case Cap: return caps[r & 0xfffffff];
        default: return steps[r & 0xfffffff];
      }
    }
    Node* node(int32_t r) const { return (r >> 28) == Val ? nodes[r & 0xfffffff] : (*this)(r).node(); }
  };
  // Records the steps over the arguments and captured tensors, the random
  // ones drawing from counter `first_draw` on.
  void instantiate(Values& v, uint64_t first_draw) const;
  // The values a replay evaluates: outputs, rebound values, gradients.
  const std::vector<int32_t>& roots() const { return roots_; }
  std::vector<Tensor> root_values(const Values& v) const;
  void release(const Values& v) const;
  // The rebound handles' old versions that die with the step (see replay),
  // with the references the replay and the handles hold to them.
  std::vector<KnownHolders> dying(const std::vector<Tensor>& caps, const std::vector<const Node*>& held) const;
  // Writes the gradients and collects the results from the evaluated values.
  Result results(const Values& v) const;

  // GPU graph replay (program_gpu.cc): a program whose values all live on
  // one GPU is captured as a graph on its first replay and launched on
  // later ones, its arguments copied in and its results copied out.
  struct Graph;
  void plan_graph();
  std::optional<Result> replay_graph(const std::vector<Tensor>& args, const std::vector<Tensor>& caps,
                                    const std::vector<const Node*>& held) const;
  bool capture(Graph& g, const std::vector<Tensor>& args, const std::vector<Tensor>& caps,
               const std::vector<const Node*>& held) const;
  bool capture_once(Graph& g, const std::vector<Tensor>& args, const std::vector<Tensor>& caps,
                    const std::vector<const Node*>& held) const;
  std::shared_ptr<Graph> graph_;  // null: never captured (not all on one GPU, random draws, ...)

  // The fusion plan of a replay's evaluation, made once from the trace's
  // arguments (null: none kept, each replay plans its own).
  void keep_plan(const std::vector<Tensor>& args);
  std::shared_ptr<const fuse::KeptPlan> plan_;

  int32_t value_of(const Trace& t, const std::shared_ptr<Node>& n);
  int32_t capture(const Trace& t, const std::shared_ptr<Node>& n);
  // The values of the arguments and captured tensors; false if one no
  // longer fits what the trace saw.
  bool resolve(const std::vector<Tensor>& args, std::vector<Tensor>& caps) const;

  std::vector<Layout> args_;
  std::vector<std::pair<int32_t, int32_t>> repeats_;  // (argument, the first that was the same tensor)
  std::vector<Captured> captured_;
  std::vector<Step> steps_;
  std::vector<GradRead> grad_reads_;
  std::vector<GradWrite> grad_writes_;
  std::vector<int32_t> outputs_, rebound_;
  // Per rebound value: the captured tensor that is the same handle's version
  // the function read (a parameter before its update), or -1.
  std::vector<int32_t> rebound_cap_;
  std::vector<int32_t> roots_;  // see roots()
  uint64_t draws_ = 0;  // random draws the function made
  // Building only: node -> value.
  std::unordered_map<const Node*, int32_t> index_;
};

// A hash of the tensors' layouts (shape, strides, offset, dtype, device,
// requires_grad): part of a compiled function's cache key.
uint64_t layout_signature(const std::vector<Tensor>& tensors);

}  // namespace pyflame::runtime
