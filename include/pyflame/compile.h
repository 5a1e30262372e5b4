// Compiled functions (docs/design/replay.md): pyflame::compile(fn) traces fn
// once per input signature (each tensor's shape, layout, dtype, device and
// requires_grad; grad mode, autocast, fusion and TF32 switches) and keeps
// the recorded graph as a program. Later calls with the same signature
// record that program over the new inputs without running fn, and evaluate
// it: the outputs come back evaluated, as ordinary tensors.
//
// Tensors fn reads without taking them as arguments (weights) are captured
// by reference: a later rebind of their handle (an optimizer step) is seen
// by the next call. Random ops draw fresh numbers on every call, the same
// ones an eager call would draw. .grad slots fn writes are written again on
// every call. A host read inside fn (item(), a copy to the host) makes its
// value part of the program's control flow: such a function is called
// eagerly from then on, after one warning on stderr.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "pyflame/tensor.h"

namespace pyflame {

using TensorFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

struct CompileOptions {
  int max_traces = 8;  // signatures traced per function; beyond: eager calls
};

class CompiledFunction {
 public:
  CompiledFunction(TensorFn fn, CompileOptions options);
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;
  // Signatures traced so far, and calls served by a replay.
  int traces() const;
  int64_t replays() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

CompiledFunction compile(TensorFn fn, CompileOptions options = {});

// The switches a trace bakes in (grad mode, autocast, fusion, TF32): part
// of every compiled function's cache key.
uint64_t compile_settings_key();

}  // namespace pyflame
