// pyflame::compile: a cache of traced programs per input signature
// (docs/design/replay.md).
#include "pyflame/compile.h"

#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "pyflame/amp.h"
#include "pyflame/autograd.h"
#include "pyflame/backend/rocm.h"
#include "pyflame/errors.h"
#include "pyflame/fusion.h"
#include "runtime/program.h"
#include "runtime/trace.h"

namespace pyflame {

uint64_t compile_settings_key() {
  const std::optional<Dtype> cast = autocast_dtype();
  return static_cast<uint64_t>(is_grad_enabled()) | static_cast<uint64_t>(get_fusion()) << 1 |
         static_cast<uint64_t>(get_fusion_gpu()) << 2 | static_cast<uint64_t>(backend::rocm::allow_tf32()) << 3 |
         static_cast<uint64_t>(backend::rocm::multi_stream()) << 4 |
         (cast ? static_cast<uint64_t>(*cast) + 1 : 0) << 8;
}

struct CompiledFunction::State {
  TensorFn fn;
  CompileOptions options;
  std::mutex mu;
  std::unordered_map<uint64_t, std::shared_ptr<const runtime::Program>> programs;
  int traces = 0;
  bool eager = false;  // traced too often, or fn cannot be replayed
  std::atomic<int64_t> replays{0};

  void go_eager(const std::string& why) {
    if (!eager) std::fprintf(stderr, "pyflame: [compile] calling the function eagerly: %s\n", why.c_str());
    eager = true;
  }
};

CompiledFunction::CompiledFunction(TensorFn fn, CompileOptions options)
    : state_(std::make_shared<State>()) {
  state_->fn = std::move(fn);
  state_->options = options;
}

std::vector<Tensor> CompiledFunction::operator()(const std::vector<Tensor>& inputs) const {
  for (const auto& t : inputs) {
    if (!t.defined()) throw ValueError("[compile] undefined input tensor");
  }
  State& s = *state_;
  if (runtime::active_trace()) return s.fn(inputs);  // inside another trace: part of it
  const uint64_t key = runtime::layout_signature(inputs) * 31 + compile_settings_key();
  std::shared_ptr<const runtime::Program> program;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.eager) return s.fn(inputs);
    auto it = s.programs.find(key);
    if (it != s.programs.end()) program = it->second;
  }
  if (program) {
    if (auto r = program->replay(inputs)) {
      s.replays.fetch_add(1, std::memory_order_relaxed);
      return std::move(r->outputs);
    }
  }
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (++s.traces > s.options.max_traces) {
      s.go_eager("traced " + std::to_string(s.options.max_traces) +
                 " times (new input signatures, or captured tensors that keep changing)");
    }
    if (s.eager) return s.fn(inputs);
  }
  runtime::Trace trace;
  std::vector<Tensor> out;
  {
    runtime::TraceScope scope(trace);
    out = s.fn(inputs);
  }
  auto built = std::make_shared<const runtime::Program>(trace, inputs, out, std::vector<Tensor>{});
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!trace.host_read.empty()) s.go_eager("it makes " + trace.host_read);
    else s.programs[key] = std::move(built);
  }
  eval(out);
  return out;
}

int CompiledFunction::traces() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->traces;
}

int64_t CompiledFunction::replays() const { return state_->replays.load(); }

CompiledFunction compile(TensorFn fn, CompileOptions options) {
  if (!fn) throw ValueError("[compile] got an empty function");
  return CompiledFunction(std::move(fn), options);
}

}  // namespace pyflame
