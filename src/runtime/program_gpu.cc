// A program replayed as a GPU graph (docs/design/replay.md). Captured on
// its first replay; later replays copy the arguments into the graph's input
// buffers, launch it and copy the results out to fresh buffers (a result
// never aliases graph memory). The captured tensors' buffers are baked in:
// a replay whose captured tensor now has another buffer (rebound by an
// optimizer step) drops the graph, as does a release of cached memory
// (clear_pool, out-of-memory recovery); a program whose graph keeps being
// dropped is not captured again. Range checks the graph makes are read
// after each launch (one wait). What cannot be captured (a host sync or a
// data-dependent shape inside a kernel) runs uncaptured, with one warning
// saying why.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>

#include "ir/primitive.h"
#include "runtime/backend.h"
#include "runtime/program.h"
#include "runtime/settings.h"

namespace pyflame::runtime {

namespace {
constexpr int kMaxInvalidations = 3;
}

struct Program::Graph {
  std::mutex mu;
  int device = 0;
  int invalidations = 0;
  std::atomic<bool> never{false};           // uncaptured from now on (read before the lock too)
  std::shared_ptr<GpuGraph> exec;
  std::vector<std::shared_ptr<Buffer>> inputs;  // per argument: the graph reads it
  std::vector<std::shared_ptr<Buffer>> baked;   // per captured tensor: the buffer the graph reads
  std::vector<Tensor> roots;                    // the captured evaluation's results (graph memory)

  void stop(const std::string& why) {
    if (!never) std::fprintf(stderr, "pyflame: [compile] replaying without a GPU graph: %s\n", why.c_str());
    never = true;
    exec.reset();
  }
  void invalidate(const char* why) {
    exec.reset();
    roots.clear();
    if (++invalidations >= kMaxInvalidations) {
      stop(std::string("the captured graph was dropped ") + std::to_string(kMaxInvalidations) +
           " times (" + why + ")");
    }
  }
};

// Captured only when every value lives on one GPU, no random op draws (its
// key is a kernel argument: a graph would repeat the numbers) and no result
// needs an autograd graph (results are copies without history; one that
// backward() already released in the traced call needs none). A program
// that touches a GPU but cannot be captured says why, once.
void Program::plan_graph() {
  if (!settings::graph_replay()) return;
  int device = -1;
  std::string why;
  // what() names the value, called only for the first one off the GPU.
  auto on_gpu = [&](const Device& d, auto&& what) {
    if (!d.is_cpu() && device < 0) device = d.index;
    if (why.empty() && (d.is_cpu() || d.index != device)) {
      why = what() + " lives on " + (d.is_cpu() ? std::string("the CPU") : "another GPU");
    }
  };
  for (size_t i = 0; i < args_.size(); ++i) {
    on_gpu(args_[i].device, [&] { return "argument " + std::to_string(i); });
  }
  for (size_t i = 0; i < captured_.size(); ++i) {
    on_gpu(captured_[i].layout.device,
           [&] { return "a tensor made outside the function (" + std::to_string(i) + ")"; });
  }
  for (const Step& s : steps_) {
    on_gpu(s.layout.device, [&] { return std::string("the result of ") + s.prim->name(); });
  }
  if (device < 0 || steps_.empty()) return;  // no GPU work: nothing to capture
  graph_ = std::make_shared<Graph>();
  graph_->device = device;
  for (int32_t r : roots()) {
    if ((r >> 28) != Val || !why.empty()) continue;
    const Step& s = steps_[r & 0xfffffff];
    if (s.layout.requires_grad && !s.grad_leaf && !s.released) {
      why = std::string("a result (of ") + s.prim->name() + ") keeps an autograd graph";
    }
  }
  if (why.empty() && draws_) why = "the function draws random numbers (their keys would be baked in)";
  if (!why.empty()) graph_->stop(why);
}

bool Program::captured() const {
  if (!graph_) return false;
  std::lock_guard<std::mutex> lock(graph_->mu);
  return graph_->exec != nullptr;
}

bool Program::capture(Graph& g, const std::vector<Tensor>& args, const std::vector<Tensor>& caps,
                      const std::vector<const Node*>& held) const {
  try {
    if (capture_once(g, args, caps, held)) return true;
  } catch (const std::exception& e) {  // out of memory for the inputs, a context that cannot be made
    g.stop(e.what());
  }
  g.inputs.clear();
  return false;
}

bool Program::capture_once(Graph& g, const std::vector<Tensor>& args, const std::vector<Tensor>& caps,
                           const std::vector<const Node*>& held) const {
  // The graph's input buffers, holding this call's arguments.
  g.inputs.clear();
  g.baked.clear();  // a captured tensor's buffer held only by its node can be donated
  {
    GpuEvaluation ev;
    std::vector<DeviceCopy> in;
    for (const Tensor& a : args) {
      g.inputs.push_back(allocate_gpu(g.device, a.nbytes()));
      in.push_back({g.inputs.back()->ptr, a.size() ? a.raw_data() : nullptr, a.nbytes()});
    }
    gpu_copy(g.device, in);
    ev.finish();
  }
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < args.size(); ++i) {
    auto n = std::make_shared<Node>();
    const Node* a = args[i].node();
    n->shape = a->shape;
    n->strides = a->strides;
    n->dtype = a->dtype;
    n->device = a->device;
    n->requires_grad = a->requires_grad;
    n->buffer = g.inputs[i];
    inputs.emplace_back(std::move(n));
  }
  std::vector<Tensor> kept;
  // Called twice: a warm-up, then under capture (whose results are kept).
  // The warm-up's results go back to the private pool first, so the
  // captured run allocates only cached blocks (no driver call in capture).
  // Only the captured run writes the rebound handles' dying old versions in
  // place (a KV cache's put): the graph then updates the baked buffer
  // itself, once per launch, and the warm-up leaves it as it was.
  int runs = 0;
  auto run = [&] {
    kept.clear();
    Values v{inputs, caps, {}, {}};
    instantiate(v, draws_ ? rng_reserve(draws_) : 0);
    std::vector<Tensor> all = root_values(v);
    DonationScope scope(runs++ ? dying(caps, held) : std::vector<KnownHolders>{});
    eval(all);
    release(v);
    kept = std::move(all);
  };
  std::string why;
  std::shared_ptr<GpuGraph> exec = gpu_graph_capture(g.device, run, why);
  if (!exec) {
    g.stop(why);
    return false;
  }
  g.exec = std::move(exec);
  g.roots = std::move(kept);
  g.baked.clear();
  for (const Tensor& c : caps) g.baked.push_back(c.buffer());
  return true;
}

std::optional<Program::Result> Program::replay_graph(const std::vector<Tensor>& args,
                                                     const std::vector<Tensor>& caps,
                                                     const std::vector<const Node*>& held) const {
  Graph& g = *graph_;
  if (g.never) return std::nullopt;
  for (const Tensor& a : args) {
    if (a.offset() != 0 || !a.is_row_contiguous()) return std::nullopt;  // copied in whole
  }
  {
    std::vector<Tensor> ready(args);
    ready.insert(ready.end(), caps.begin(), caps.end());
    eval(ready);
  }
  std::unique_lock<std::mutex> lock(g.mu);
  if (g.never) return std::nullopt;
  if (g.exec) {
    for (size_t i = 0; i < caps.size(); ++i) {
      if (caps[i].buffer() != g.baked[i]) {
        g.invalidate("a captured tensor has new memory: rebound by an update");
        break;
      }
    }
  }
  if (!g.exec && (g.never || !capture(g, args, caps, held))) return std::nullopt;
  // Results: steps come out of graph memory into fresh buffers; arguments
  // and captured tensors are themselves. A handle's new value (a parameter
  // after an optimizer step) goes back into the buffer of the version the
  // graph read, in place, as PyTorch's optimizers update: the next replay
  // reads the same memory, so the graph stays valid. A new value the graph
  // wrote into that buffer itself (a KV cache's put took it over in the
  // captured run) needs no copy.
  const std::vector<int32_t>& roots = this->roots();
  std::vector<int32_t> write_back(steps_.size(), -1);  // step -> captured tensor
  for (size_t i = 0; i < rebound_.size(); ++i) {
    const int32_t r = rebound_[i], c = rebound_cap_[i];
    if ((r >> 28) == Val && c >= 0 && std::count(rebound_cap_.begin(), rebound_cap_.end(), c) == 1) {
      write_back[r & 0xfffffff] = c;
    }
  }
  Values v{args, caps, std::vector<Tensor>(steps_.size()), {}};
  std::vector<DeviceCopy> in, out;
  for (size_t i = 0; i < args.size(); ++i) {
    in.push_back({g.inputs[i]->ptr, args[i].size() ? args[i].raw_data() : nullptr, args[i].nbytes()});
  }
  GpuEvaluation ev;
  for (size_t k = 0; k < roots.size(); ++k) {
    const int32_t r = roots[k];
    if ((r >> 28) != Val || v.steps[r & 0xfffffff].defined()) continue;
    const Node* src = g.roots[k].node();
    auto n = std::make_shared<Node>();
    n->shape = src->shape;
    n->strides = src->strides;
    n->offset = src->offset;
    n->dtype = src->dtype;
    n->device = src->device;
    n->requires_grad = src->requires_grad;
    n->grad_leaf = src->grad_leaf;
    n->graph_released = src->requires_grad && !src->grad_leaf;  // released in the traced call
    const size_t bytes = src->buffer ? src->buffer->bytes : 0;
    const int32_t c = write_back[r & 0xfffffff];
    const Node* old = c >= 0 ? caps[c].node() : nullptr;
    if (old && bytes && old->offset == 0 && src->offset == 0 && old->dtype == src->dtype &&
        old->buffer == g.baked[c] && old->buffer->bytes == bytes && old->strides == src->strides &&
        old->shape == src->shape) {
      n->buffer = g.baked[c];
    } else {
      n->buffer = allocate_gpu(g.device, bytes);
    }
    if (n->buffer != src->buffer) out.push_back({n->buffer->ptr, bytes ? src->buffer->ptr : nullptr, bytes});
    v.steps[r & 0xfffffff] = Tensor(std::move(n));
  }
  if (!gpu_graph_replay(*g.exec, in, out)) {
    g.invalidate("the memory pool was released: clear_pool or out-of-memory recovery");
    return std::nullopt;
  }
  // Enqueued: the next replay (any thread) is ordered after this one by the
  // graph's event, so this call waits for its results without the lock.
  lock.unlock();
  ev.finish();
  return results(v);
}

}  // namespace pyflame::runtime
