// Fused regions on the CPU, numexpr's way: the index space in blocks small
// enough that every step's values stay in the L1/L2 cache; each step runs
// one vectorizable loop over the block. A step keeps its values in the
// arithmetic type (float for 16-bit floats) after rounding to its dtype, so
// each op sees exactly what the unfused kernel reads from memory.
#include <algorithm>
#include <memory>

#include "backend/cpu/elementwise_ops.h"
#include "backend/cpu/reduce.h"
#include "backend/cpu/vec_math.h"
#include "backend/elementwise_math.h"
#include "ir/fused.h"

namespace pyflame {

namespace {

using cpu::acc_t;
using Kind = FusedStep::Kind;

constexpr int64_t kBlock = 4096;

// A step's values over the current block: element i at p[i * stride]
// (stride 0: one value for the whole block).
struct Val {
  const void* p;
  int64_t stride;
};

template <typename T>
const acc_t<T>* at(const Val& v) {
  return static_cast<const acc_t<T>*>(v.p);
}

template <UnaryOp Op, typename T>
void unary_block(const Val& x, acc_t<T>* o, int64_t n) {
  const acc_t<T>* p = at<T>(x);
  if (x.stride == 0) n = 1;
  if constexpr (cpu::vec_unary(Op) && std::is_floating_point_v<acc_t<T>>) {
    // The unfused kernel's array kernel, then its rounding to T.
    cpu::unary_array(Op, p, o, n);
    if constexpr (cpu::is_half_v<T>) {
      for (int64_t i = 0; i < n; ++i) o[i] = acc_t<T>(T(o[i]));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = acc_t<T>(T(unary_apply<Op>(p[i])));
  }
}

template <BinaryOp Op, typename T>
void binary_block(const Val& x, const Val& y, void* out, int64_t n) {
  using R = std::conditional_t<is_comparison(Op), bool, T>;
  using A = std::conditional_t<std::is_same_v<T, bool>, int32_t, acc_t<T>>;
  auto* o = static_cast<acc_t<R>*>(out);
  const acc_t<T>* a = at<T>(x);
  const acc_t<T>* b = at<T>(y);
  auto f = [](acc_t<T> u, acc_t<T> v) { return acc_t<R>(R(binary_apply<Op>(A(u), A(v)))); };
  if (x.stride && y.stride) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
  } else if (x.stride) {
    const acc_t<T> v = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], v);
  } else if (y.stride) {
    const acc_t<T> u = a[0];
    for (int64_t i = 0; i < n; ++i) o[i] = f(u, b[i]);
  } else {
    o[0] = f(a[0], b[0]);
  }
}

template <typename T>
void where_block(const Val& c, const Val& x, const Val& y, acc_t<T>* o, int64_t n) {
  const bool* m = static_cast<const bool*>(c.p);
  const acc_t<T>* a = at<T>(x);
  const acc_t<T>* b = at<T>(y);
  const int64_t sc = c.stride, sa = x.stride, sb = y.stride;
  if (!sc && !sa && !sb) n = 1;
  if (sc && sa && sb) {
    for (int64_t i = 0; i < n; ++i) o[i] = cpu::select(m[i], a[i], b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = cpu::select(m[i * sc], a[i * sa], b[i * sb]);
  }
}

template <typename From, typename To>
void cast_block(const Val& x, acc_t<To>* o, int64_t n) {
  const acc_t<From>* p = at<From>(x);
  if (x.stride == 0) n = 1;
  for (int64_t i = 0; i < n; ++i) o[i] = acc_t<To>(cpu::convert<From, To>(From(p[i])));
}

// How a load reads: straight from memory (its type is already the
// arithmetic type and it is contiguous or one broadcast value), or gathered
// and converted into the step's block.
struct LoadPlan {
  const void* base;
  Dtype dtype;
  Layout<1> layout;
  bool direct;
  int64_t stride;  // of a one-run layout: 1 contiguous, 0 broadcast, -1 otherwise
};

LoadPlan plan_load(const Tensor& t, const Shape& shape) {
  LoadPlan L{t.raw_data(), t.dtype(), cpu::collapse<1>(shape, {&t.strides()}), false, -1};
  if (L.layout.shape.empty()) {
    L.stride = 0;
  } else if (L.layout.shape.size() == 1 && (L.layout.strides[0][0] == 0 || L.layout.strides[0][0] == 1)) {
    L.stride = L.layout.strides[0][0];
  }
  L.direct = L.stride >= 0 && t.dtype() != Dtype::Float16 && t.dtype() != Dtype::BFloat16;
  return L;
}

template <typename T>
Val load_block(const LoadPlan& L, int64_t start, int64_t n, acc_t<T>* buf) {
  const T* p = static_cast<const T*>(L.base);
  if (L.direct) return {L.stride ? static_cast<const void*>(p + start) : L.base, L.stride};
  if (L.stride == 0) {
    buf[0] = acc_t<T>(p[0]);
    return {buf, 0};
  }
  int64_t k = 0;
  cpu::for_each_run<1>(L.layout, start, start + n, [&](auto off, int64_t len, auto ls) {
    const T* s = p + off[0];
    if (ls[0] == 1) {
      for (int64_t j = 0; j < len; ++j) buf[k + j] = acc_t<T>(s[j]);
    } else {
      for (int64_t j = 0; j < len; ++j) buf[k + j] = acc_t<T>(s[j * ls[0]]);
    }
    k += len;
  });
  return {buf, 1};
}

// A scalar in its step's arithmetic type, converted as Full converts it.
struct ScalarVal {
  alignas(8) unsigned char bytes[8];
};

ScalarVal scalar_value(double v, Dtype t) {
  ScalarVal s{};
  cpu::dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    const acc_t<T> a = acc_t<T>(T(static_cast<acc_t<T>>(v)));
    std::memcpy(s.bytes, &a, sizeof(a));
  });
  return s;
}

// Bytes of a dtype's arithmetic type (16-bit floats compute in float).
size_t acc_size(Dtype t) {
  return t == Dtype::Float16 || t == Dtype::BFloat16 ? 4 : itemsize(t);
}

// One step over one block; returns where its values are.
Val run_step(const FusedStep& s, const std::vector<Val>& v, const std::vector<LoadPlan>& loads,
             const std::vector<ScalarVal>& scalars, const std::vector<Dtype>& dt, int64_t start, int64_t n,
             void* buf) {
  switch (s.kind) {
    case Kind::Load: {
      Val r{buf, 1};
      cpu::dispatch(s.dtype, [&](auto tag) {
        using T = decltype(tag);
        r = load_block<T>(loads[s.slot], start, n, static_cast<acc_t<T>*>(buf));
      });
      return r;
    }
    case Kind::Scalar: return {scalars[s.slot].bytes, 0};
    case Kind::Unary:
      visit_unary(UnaryOp(s.op), [&](auto opc) {
        cpu::dispatch(s.dtype, [&](auto tag) {
          using T = decltype(tag);
          if constexpr (!std::is_same_v<T, bool>) {
            if constexpr (std::is_floating_point_v<acc_t<T>> || unary_takes_ints<decltype(opc)::value>) {
              unary_block<decltype(opc)::value, T>(v[s.a], static_cast<acc_t<T>*>(buf), n);
            }
          }
        });
      });
      return {buf, v[s.a].stride};
    case Kind::Binary:
      visit_binary(BinaryOp(s.op), [&](auto opc) {
        cpu::dispatch(dt[s.a], [&](auto tag) {
          binary_block<decltype(opc)::value, decltype(tag)>(v[s.a], v[s.b], buf, n);
        });
      });
      return {buf, v[s.a].stride | v[s.b].stride};
    case Kind::Where:
      cpu::dispatch(s.dtype, [&](auto tag) {
        where_block<decltype(tag)>(v[s.a], v[s.b], v[s.c], static_cast<acc_t<decltype(tag)>*>(buf), n);
      });
      return {buf, v[s.a].stride | v[s.b].stride | v[s.c].stride};
    case Kind::Cast:
      cpu::dispatch(dt[s.a], [&](auto from) {
        cpu::dispatch(s.dtype, [&](auto to) {
          using To = decltype(to);
          cast_block<decltype(from), To>(v[s.a], static_cast<acc_t<To>*>(buf), n);
        });
      });
      return {buf, v[s.a].stride};
  }
  return {buf, 0};
}

template <typename T>
void store_block(const Val& v, T* o, int64_t n) {
  const acc_t<T>* p = at<T>(v);
  if (v.stride == 0) {
    std::fill(o, o + n, T(p[0]));
  } else if (static_cast<const void*>(p) != static_cast<const void*>(o)) {
    for (int64_t i = 0; i < n; ++i) o[i] = T(p[i]);
  }
}

// A region's tape over blocks of its index space.
struct Tape {
  const FusedRegion& r;
  std::vector<LoadPlan> loads;
  std::vector<ScalarVal> scalars;  // numbered in tape order, as the slots
  std::vector<Dtype> dt;

  Tape(const FusedRegion& region, const std::vector<Tensor>& in) : r(region), dt(region.steps.size()) {
    for (const Tensor& t : in) loads.push_back(plan_load(t, r.shape));
    for (size_t i = 0; i < r.steps.size(); ++i) dt[i] = r.steps[i].dtype;
    for (const FusedStep& s : r.steps) {
      if (s.kind == Kind::Scalar) scalars.push_back(scalar_value(r.scalars[s.slot], s.dtype));
    }
  }

  // One thread's working memory: a block of `block` elements per step, left
  // uninitialized (every step writes its block before any step reads it),
  // and no larger than the index space: a 16-element region takes a few
  // hundred bytes, not a zeroed 32 KiB per step.
  struct Scratch {
    std::unique_ptr<int64_t[]> blocks;  // 8 bytes per element covers every arithmetic type
    int64_t block;
    std::vector<Val> v;
    Scratch(size_t ns, int64_t block_elems)
        : blocks(new int64_t[ns * static_cast<size_t>(block_elems)]), block(block_elems), v(ns) {}
  };

  // Runs every step over [start, start + n); the last step writes into
  // `direct` when given (an output in its arithmetic type).
  void run(int64_t start, int64_t n, Scratch& w, void* direct) const {
    const size_t ns = r.steps.size();
    for (size_t i = 0; i < ns; ++i) {
      void* buf = w.blocks.get() + i * w.block;
      if (i == ns - 1 && direct && r.steps[i].kind != Kind::Load && r.steps[i].kind != Kind::Scalar) buf = direct;
      w.v[i] = run_step(r.steps[i], w.v, loads, scalars, dt, start, n, buf);
    }
  }
};

// A reduction of the region's values (a row reduction with an elementwise
// prologue): the reduction kernel asks for blocks of values, computed here.
void reduce_fused_cpu(const Tape& tape, Tensor& out) {
  const FusedRegion& r = tape.r;
  const Dtype t = r.steps.back().dtype;
  const int nt = cpu::max_threads();
  // A source block holds at most kSourceBlock of the region's elements.
  static_assert(cpu::kSourceBlock <= kBlock);
  const int64_t block = std::min<int64_t>(kBlock, std::max<int64_t>(1, shape_size(r.shape)));
  std::vector<std::unique_ptr<Tape::Scratch>> work(nt);
  std::vector<std::vector<int64_t>> vals(nt);
  cpu::reduce_source(r.reduce_op, t, r.shape, r.reduce_axes, [&](int64_t start, int64_t n) -> const void* {
    const int k = omp_get_thread_num();
    if (!work[k]) {
      work[k] = std::make_unique<Tape::Scratch>(r.steps.size(), block);
      vals[k].resize(block);
    }
    tape.run(start, n, *work[k], nullptr);
    const Val& v = work[k]->v.back();
    const void* p = nullptr;
    cpu::dispatch(t, [&](auto tag) {
      using T = decltype(tag);
      if (std::is_same_v<acc_t<T>, T> && v.stride == 1) {
        p = v.p;  // already the input's values in memory form
      } else {
        store_block<T>(v, reinterpret_cast<T*>(vals[k].data()), n);
        p = vals[k].data();
      }
    });
    return p;
  }, out);
}

}  // namespace

void eval_fused_cpu(const FusedRegion& r, const std::vector<Tensor>& in, std::vector<Tensor>& outs) {
  const Tape tape(r, in);
  if (r.reduce) {
    reduce_fused_cpu(tape, outs.back());
    return;
  }
  const Dtype od = r.steps.back().dtype;
  const bool out_direct = od != Dtype::Float16 && od != Dtype::BFloat16;
  char* out_base = static_cast<char*>(outs.back().raw_data());
  cpu::parallel_for(outs.back().size(), cpu::kGrain, [&](int64_t begin, int64_t end) {
    Tape::Scratch w(r.steps.size(), std::min(kBlock, end - begin));
    for (int64_t start = begin; start < end; start += kBlock) {
      const int64_t n = std::min(kBlock, end - start);
      // The output step writes straight into the result when it can.
      tape.run(start, n, w, out_direct ? out_base + start * acc_size(od) : nullptr);
      for (size_t k = 0; k < outs.size(); ++k) {
        cpu::dispatch(tape.dt[r.output_steps[k]], [&](auto tag) {
          using T = decltype(tag);
          store_block<T>(w.v[r.output_steps[k]], static_cast<T*>(outs[k].raw_data()) + start, n);
        });
      }
    }
  });
}

}  // namespace pyflame
