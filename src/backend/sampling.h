// Categorical sampling of one row (the Multinomial primitive's algorithm,
// see ir/primitives_sort.h), shared by the CPU and GPU backends so a seed
// draws the same indices on every device: every sum is a sequential float64
// sum in a fixed order, and only additions are used (no contraction).
#pragma once
#include <cstdint>

#include "core/random_bits.h"

namespace pyflame::sampling {

constexpr int kChunks = 256;

PF_HD inline int64_t chunk_len(int64_t V) { return (V + kChunks - 1) / kChunks; }

PF_HD inline bool is_picked(int64_t i, const int64_t* picked, int64_t npicked) {
  for (int64_t k = 0; k < npicked; ++k) {
    if (picked[k] == i) return true;
  }
  return false;
}

// Which categories are already drawn (without replacement). ScanPicked
// searches the draws so far (no memory beyond the output: the GPU kernel's
// choice); FlagPicked keeps a flag per category, so a draw costs O(V/kChunks)
// instead of O(draws so far) (the CPU's). Both answer alike: the same indices.
struct ScanPicked {
  const int64_t* picked;
  PF_HD bool has(int64_t i, int64_t npicked) const { return is_picked(i, picked, npicked); }
  PF_HD void mark(int64_t) {}
};

struct FlagPicked {
  uint8_t* flags;  // V entries, zero before the row's first draw (none with replacement)
  bool has(int64_t i, int64_t npicked) const { return npicked != 0 && flags[i] != 0; }
  void mark(int64_t i) { flags[i] = 1; }
};

// Sum of chunk c's weights (entries already picked count as 0), or -1 when
// one is negative, inf or NaN.
template <typename T, typename Picked>
PF_HD double chunk_sum_of(const T* p, int64_t V, int c, const Picked& picked, int64_t npicked) {
  const int64_t L = chunk_len(V), begin = c * L, end = begin + L < V ? begin + L : V;
  double s = 0.0;
  for (int64_t i = begin; i < end; ++i) {
    const double w = static_cast<double>(static_cast<float>(p[i]));
    if (!(w >= 0.0) || (w - w) != 0.0) return -1.0;
    if (!picked.has(i, npicked)) s += w;
  }
  return s;
}

template <typename T>
PF_HD double chunk_sum(const T* p, int64_t V, int c, const int64_t* picked, int64_t npicked) {
  return chunk_sum_of(p, V, c, ScanPicked{picked}, npicked);
}

// Draws ns indices of row `row` (weights p[0..V)) into out, given the chunk
// sums cs[kChunks] (updated in place without replacement). Returns 0, or
// the error code of multinomial_error().
template <typename T, typename Picked>
PF_HD int sample_row_with(const T* p, int64_t V, int64_t ns, bool replacement, uint64_t key, int64_t row,
                          double* cs, int64_t* out, Picked& picked) {
  for (int c = 0; c < kChunks; ++c) {
    if (cs[c] < 0.0) return 1;
  }
  const int64_t L = chunk_len(V);
  for (int64_t s = 0; s < ns; ++s) {
    double total = 0.0;
    for (int c = 0; c < kChunks; ++c) total += cs[c];
    if (!(total > 0.0)) return s == 0 ? 2 : 3;
    const uint64_t bits = random_bits(key, static_cast<uint64_t>(row * ns + s));
    double t = static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0) * total;
    double run = 0.0;
    int c = 0, last_c = 0;
    for (; c < kChunks; ++c) {
      if (cs[c] > 0.0) last_c = c;
      if (run + cs[c] > t) break;
      run += cs[c];
    }
    if (c == kChunks) c = last_c;  // rounding left t at the total
    t -= run;
    const int64_t begin = c * L, end = begin + L < V ? begin + L : V;
    const int64_t npicked = replacement ? 0 : s;
    int64_t pick = -1, last = -1;
    double acc = 0.0;
    for (int64_t i = begin; i < end; ++i) {
      const double w = static_cast<double>(static_cast<float>(p[i]));
      if (w > 0.0 && !picked.has(i, npicked)) {
        last = i;
        acc += w;
        if (acc > t) {
          pick = i;
          break;
        }
      }
    }
    out[s] = pick >= 0 ? pick : last;
    if (!replacement) {
      picked.mark(out[s]);
      cs[c] = chunk_sum_of(p, V, c, picked, s + 1);
    }
  }
  return 0;
}

template <typename T>
PF_HD int sample_row(const T* p, int64_t V, int64_t ns, bool replacement, uint64_t key, int64_t row,
                     double* cs, int64_t* out) {
  ScanPicked picked{out};
  return sample_row_with(p, V, ns, replacement, key, row, cs, out, picked);
}

}  // namespace pyflame::sampling
