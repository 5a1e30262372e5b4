// A Primitive is the op attached to a graph node. It evaluates on each
// backend (eval_cpu in backend/cpu, eval_gpu in backend/rocm) into an output
// whose buffer the eval loop has already allocated. View primitives compute
// nothing: the output shares its input's buffer with its own layout.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "pyflame/errors.h"
#include "pyflame/tensor.h"

namespace pyflame {

// Collects a primitive's parameters as a flat list of 64-bit words, in
// declaration order: the one description equality and hashing derive from
// (the key of kernel caches and of graph replay). Floats go in by their
// bits, so 0.0 and -0.0 differ and a NaN equals itself; strings and vectors
// by length then contents, so neighbouring fields cannot run together.
class ParamSink {
 public:
  template <class... T>
  void operator()(const T&... v) {
    (put(v), ...);
  }
  const std::vector<uint64_t>& words() const { return words_; }

 private:
  template <class T>
  void put(const T& v) {
    if constexpr (std::is_enum_v<T>) {
      word(static_cast<uint64_t>(static_cast<std::underlying_type_t<T>>(v)));
    } else if constexpr (std::is_same_v<T, bool> || std::is_integral_v<T>) {
      word(static_cast<uint64_t>(static_cast<int64_t>(v)));
    } else if constexpr (std::is_same_v<T, double>) {
      word(std::bit_cast<uint64_t>(v));
    } else if constexpr (std::is_same_v<T, float>) {
      word(std::bit_cast<uint32_t>(v));
    } else if constexpr (std::is_same_v<T, std::string>) {
      text(v.data(), v.size());
    } else if constexpr (std::is_same_v<T, const char*> || std::is_same_v<T, char*>) {
      text(v ? v : "", v ? std::strlen(v) : 0);
    } else if constexpr (requires { v.params(*this); }) {
      v.params(*this);  // a parameter struct, or another primitive's parameters
    } else if constexpr (requires { v.has_value(); *v; }) {
      word(v.has_value());
      if (v) put(*v);
    } else {
      static_assert(requires { v.size(); v.begin(); }, "ParamSink: unsupported parameter type");
      word(v.size());
      for (const auto& e : v) put(e);
    }
  }
  void word(uint64_t w) { words_.push_back(w); }
  void text(const char* p, size_t n) {
    word(n);
    for (size_t i = 0; i < n; i += 8) {
      uint64_t w = 0;
      std::memcpy(&w, p + i, std::min<size_t>(8, n - i));
      word(w);
    }
  }
  std::vector<uint64_t> words_;
};

class Primitive {
 public:
  virtual ~Primitive() = default;
  virtual const char* name() const = 0;
  virtual void eval_cpu(const std::vector<Tensor>& inputs, Tensor& out) = 0;
  virtual void eval_gpu(const std::vector<Tensor>& inputs, Tensor& out) = 0;
  virtual bool is_view() const { return false; }
  // The class, for the few the fusion pass groups: it sorts every node of
  // every evaluation, and a virtual call is cheaper than a dynamic_cast
  // chain (a type-name comparison per miss).
  enum class Family : uint8_t { Other, Full, Unary, Binary, Where, AsType, Reduce };
  virtual Family family() const { return Family::Other; }
  // The input whose buffer the output may take over (an in-place write),
  // or -1. The eval loop donates it only when nothing else can observe the
  // input afterwards (see donated_buffer in runtime/eval.cc); the primitive
  // then sees out.buffer() == inputs[i].buffer() and writes only what
  // changes.
  virtual int donor_input() const { return -1; }
  // Vector-Jacobian product: the cotangents of inputs[i] for each i in
  // argnums, given the output's cotangent `cotan` (the output's shape and
  // dtype). Written with ops, so gradients are graphs on any backend. The
  // default raises "not differentiable".
  virtual std::vector<Tensor> vjp(const std::vector<Tensor>& inputs, const Tensor& cotan,
                                  const Tensor& out, const std::vector<int>& argnums);
  // Every parameter that changes what the primitive computes, declared once
  // (PF_PARAMS below). Pure virtual: a class that forgets it cannot be made.
  // The node's shapes, dtypes and devices are not parameters: they belong
  // to the graph, not to the op.
  virtual void params(ParamSink& sink) const = 0;
  // Same class, same name and equal parameters: the same computation on
  // inputs of the same layout.
  bool equal(const Primitive& other) const;
  // Consistent with equal(): equal primitives hash alike.
  size_t hash() const;
};

// Declares a primitive's parameters, e.g. PF_PARAMS(op, axes).
#define PF_PARAMS(...) \
  void params(ParamSink& sink) const override { sink(__VA_ARGS__); }
// A primitive with no parameters (its class and inputs say everything).
#define PF_NO_PARAMS \
  void params(ParamSink&) const override {}

// Declares a primitive's two backend entries (defined in backend/cpu and
// backend/rocm/kernels).
#define PF_EVAL_DECLS                                                    \
  void eval_cpu(const std::vector<Tensor>& inputs, Tensor& out) override; \
  void eval_gpu(const std::vector<Tensor>& inputs, Tensor& out) override;

// Declares a primitive's vector-Jacobian product (defined in src/autograd).
#define PF_VJP_DECL                                                                     \
  std::vector<Tensor> vjp(const std::vector<Tensor>& inputs, const Tensor& cotan,       \
                          const Tensor& out, const std::vector<int>& argnums) override;

// Shares input 0's buffer; the layout was fixed when the node was recorded.
class ViewPrimitive : public Primitive {
 public:
  bool is_view() const final { return true; }
  void eval_cpu(const std::vector<Tensor>&, Tensor&) final {}
  void eval_gpu(const std::vector<Tensor>&, Tensor&) final {}
};

}  // namespace pyflame
