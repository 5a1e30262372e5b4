// CPU kernels of the sort family: argmax/argmin, argsort (std::stable_sort
// of indices), cumsum (sequential per line) and multinomial (the shared
// algorithms of backend/sampling.h).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/kernel_utils.h"
#include "backend/sampling.h"
#include "ir/primitives.h"

namespace pyflame {

namespace {
// Sort keys: 16-bit floats compare as float, bool as int.
template <typename T>
using key_t = std::conditional_t<std::is_same_v<T, bool>, int32_t, cpu::acc_t<T>>;
}  // namespace

void ArgReduce::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const LineShape ls = line_shape(in[0].shape(), axis);
  const bool mx = is_max;
  int64_t* o = out.data<int64_t>();
  cpu::dispatch(in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    using K = key_t<T>;
    const T* x = in[0].data<T>();
    cpu::parallel_for(ls.outer * ls.inner, 1024, [&](int64_t b, int64_t e) {
      for (int64_t line = b; line < e; ++line) {
        const T* p = x + (line / ls.inner) * ls.n * ls.inner + line % ls.inner;
        K best = static_cast<K>(p[0]);
        int64_t bi = 0;
        for (int64_t i = 1; i < ls.n; ++i) {
          const K v = static_cast<K>(p[i * ls.inner]);
          if (arg_better(v, best, mx)) {
            best = v;
            bi = i;
          }
        }
        o[line] = bi;
      }
    });
  });
}

void ArgSort::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const int64_t n = in[0].shape().back(), rows = in[0].size() / n;
  const bool desc = descending;
  int64_t* o = out.data<int64_t>();
  cpu::dispatch(in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    using K = key_t<T>;
    const T* x = in[0].data<T>();
    cpu::parallel_for(rows, 1, [&](int64_t b, int64_t e) {
      std::vector<K> keys(n);
      for (int64_t r = b; r < e; ++r) {
        for (int64_t i = 0; i < n; ++i) keys[i] = static_cast<K>(x[r * n + i]);
        int64_t* idx = o + r * n;
        std::iota(idx, idx + n, int64_t{0});
        std::stable_sort(idx, idx + n,
                         [&](int64_t a, int64_t c) { return sort_before(keys[a], keys[c], desc); });
      }
    });
  });
}

void Cumsum::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const LineShape ls = line_shape(out.shape(), axis);
  const bool rev = reverse;
  cpu::dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = key_t<T>;
    const T* x = in[0].data<T>();
    T* o = out.data<T>();
    cpu::parallel_for(ls.outer * ls.inner, 1024, [&](int64_t b, int64_t e) {
      for (int64_t line = b; line < e; ++line) {
        const int64_t base = (line / ls.inner) * ls.n * ls.inner + line % ls.inner;
        A acc = 0;
        for (int64_t k = 0; k < ls.n; ++k) {
          const int64_t i = base + (rev ? ls.n - 1 - k : k) * ls.inner;
          acc += static_cast<A>(x[i]);
          o[i] = static_cast<T>(acc);
        }
      }
    });
  });
}

namespace {

// The sequential draws of backend/sampling.h, row by row (a flag per
// category keeps the draws so far without replacement).
template <typename T>
int draw_sequential(const T* p, int64_t R, int64_t V, int64_t ns, bool replacement, uint64_t key, int64_t* o) {
  std::vector<uint8_t> flags(replacement ? 0 : V);
  for (int64_t r = 0; r < R; ++r) {
    double cs[sampling::kChunks];
    for (int c = 0; c < sampling::kChunks; ++c) cs[c] = sampling::chunk_sum(p + r * V, V, c, o, 0);
    std::fill(flags.begin(), flags.end(), uint8_t{0});
    sampling::FlagPicked picked{flags.data()};
    if (const int err = sampling::sample_row_with(p + r * V, V, ns, replacement, key, r, cs, o + r * ns, picked)) {
      return err;
    }
  }
  return 0;
}

// Many draws with replacement: the prefix sums of backend/sampling.h, then
// the draws in parallel (the sequential draws' indices).
template <typename T>
int draw_by_prefix(const T* p, int64_t R, int64_t V, int64_t ns, uint64_t key, int64_t* o) {
  std::vector<double> acc(V);
  std::vector<int64_t> last(sampling::kChunks);
  double cs[sampling::kChunks], run[sampling::kChunks + 1];
  for (int64_t r = 0; r < R; ++r) {
    const T* pr = p + r * V;
    sampling::Prefix x{run, acc.data(), last.data(), 0};
    for (int c = 0; c < sampling::kChunks; ++c) cs[c] = sampling::chunk_sum(pr, V, c, o, 0);
    if (const int err = sampling::run_sums(cs, run, x.last_c)) return err;
    cpu::parallel_for(sampling::kChunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) sampling::chunk_prefix(pr, V, int(c), acc.data(), last.data());
    });
    cpu::parallel_for(ns, 4096, [&](int64_t b, int64_t e) {
      for (int64_t s = b; s < e; ++s) o[r * ns + s] = sampling::draw_by_prefix(x, V, key, r, ns, s);
    });
  }
  return 0;
}

// The race of backend/sampling.h: the ns first entries of positive weight in
// the race order, by a selection, then a sort of those.
template <typename T>
int draw_race(const T* p, int64_t R, int64_t V, int64_t ns, uint64_t key, int64_t* o) {
  constexpr int N = 4;  // logarithms computed together
  struct Entry {
    double key;
    int64_t i;
    bool operator<(const Entry& b) const { return sampling::race_before(key, i, b.key, b.i); }
  };
  std::vector<double> keys(V);
  std::vector<Entry> live;
  for (int64_t r = 0; r < R; ++r) {
    cpu::parallel_for((V + N - 1) / N, 1024, [&](int64_t b, int64_t e) {
      for (int64_t g = b; g < e; ++g) {
        if ((g + 1) * N <= V) {
          sampling::race_keys<N>(p, key, r, V, g * N, &keys[g * N]);
        } else {
          for (int64_t i = g * N; i < V; ++i) sampling::race_keys<1>(p, key, r, V, i, &keys[i]);
        }
      }
    });
    live.clear();
    for (int64_t i = 0; i < V; ++i) {
      if (keys[i] < 0.0) return 1;
      if (std::isfinite(keys[i])) live.push_back({keys[i], i});
    }
    if (live.empty()) return 2;
    if (int64_t(live.size()) < ns) return 3;
    if (int64_t(live.size()) > ns) std::nth_element(live.begin(), live.begin() + ns, live.end());
    std::sort(live.begin(), live.begin() + ns);
    for (int64_t s = 0; s < ns; ++s) o[r * ns + s] = live[s].i;
  }
  return 0;
}

}  // namespace

void Multinomial::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const int64_t R = in[0].shape()[0], V = in[0].shape()[1], ns = num_samples;
  int64_t* o = out.data<int64_t>();
  int err = 0;
  cpu::dispatch_float(in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = in[0].data<T>();
    err = sampling::use_race(replacement, ns)     ? draw_race(p, R, V, ns, key, o)
          : sampling::use_prefix(replacement, ns) ? draw_by_prefix(p, R, V, ns, key, o)
                                                  : draw_sequential(p, R, V, ns, replacement, key, o);
  });
  if (err) throw RuntimeError(multinomial_error(err));
}

}  // namespace pyflame
