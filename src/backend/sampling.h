// Categorical sampling of one row (the Multinomial primitive's algorithm,
// see ir/primitives_sort.h), shared by the CPU and GPU backends so a seed
// draws the same indices on every device: every sum is a sequential float64
// sum in a fixed order, and only additions are used (no contraction); the
// race keys (many draws without replacement) are integers but for one division.
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

// With replacement, more than kSequentialMax draws: sample_row_with's draws,
// each found by two binary searches over the running sums its scans compute
// (the same additions in the same order, so the same indices), and the
// draws independent of one another (parallel).
struct Prefix {
  const double* run;     // kChunks + 1: run[c] = cs[0] + ... + cs[c - 1], summed in order
  const double* acc;     // V: the running sum of the chunk's positive weights up to i
  const int64_t* last;   // kChunks: the chunk's last entry of positive weight
  int last_c;            // the last chunk of positive sum
};

// acc over chunk c and its last[c].
template <typename T>
PF_HD void chunk_prefix(const T* p, int64_t V, int c, double* acc, int64_t* last) {
  const int64_t L = chunk_len(V), begin = c * L, end = begin + L < V ? begin + L : V;
  double a = 0.0;
  int64_t l = -1;
  for (int64_t i = begin; i < end; ++i) {
    const double w = static_cast<double>(static_cast<float>(p[i]));
    if (w > 0.0) {
      a += w;
      l = i;
    }
    acc[i] = a;
  }
  last[c] = l;
}

// run and last_c from the chunk sums; 0, or sample_row_with's error code.
PF_HD inline int run_sums(const double* cs, double* run, int& last_c) {
  run[0] = 0.0;
  last_c = 0;
  for (int c = 0; c < kChunks; ++c) {
    if (cs[c] < 0.0) return 1;
    if (cs[c] > 0.0) last_c = c;
    run[c + 1] = run[c] + cs[c];
  }
  return run[kChunks] > 0.0 ? 0 : 2;
}

PF_HD inline int64_t draw_by_prefix(const Prefix& x, int64_t V, uint64_t key, int64_t row, int64_t ns, int64_t s) {
  const uint64_t bits = random_bits(key, static_cast<uint64_t>(row * ns + s));
  double t = static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0) * x.run[kChunks];
  int lo = 0, hi = kChunks;  // the first chunk whose running total exceeds t
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (x.run[mid + 1] > t) hi = mid;
    else lo = mid + 1;
  }
  const int c = lo < kChunks ? lo : x.last_c;  // rounding left t at the total
  t -= x.run[lo];
  const int64_t L = chunk_len(V), begin = c * L, end = begin + L < V ? begin + L : V;
  int64_t a = begin, b = end;  // the first entry whose running sum exceeds t
  while (a < b) {
    const int64_t mid = a + (b - a) / 2;
    if (x.acc[mid] > t) b = mid;
    else a = mid + 1;
  }
  return a < end ? a : x.last[c];
}

// Without replacement, more than kSequentialMax draws: an exponential race.
// Entry i of row `row` draws E_i = -log(u_i), u_i from random_bits(key,
// row * V + i), and the draws are the entries in increasing order of
// E_i / w_i (then of i): the first is i with probability w_i / sum(w), each
// next one likewise among the rest (the sequential draws' law, as
// PyTorch's), and the order is one sort. -log2(u) is computed in integers
// (a fixed-point logarithm), so the keys, one rounded division each, are the
// same bits on every device, and so are the draws. Up to kSequentialMax
// draws, the sequential draws above cost less than V logarithms.
constexpr int64_t kSequentialMax = 32;
constexpr int kRaceBits = 44;  // fraction bits of -log2(u)

PF_HD inline bool use_race(bool replacement, int64_t ns) { return !replacement && ns > kSequentialMax; }
PF_HD inline bool use_prefix(bool replacement, int64_t ns) { return replacement && ns > kSequentialMax; }

PF_HD inline void square(uint64_t x, uint64_t& hi, uint64_t& lo) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  hi = __umul64hi(x, x);
  lo = x * x;
#else
  const unsigned __int128 sq = static_cast<unsigned __int128>(x) * x;
  hi = static_cast<uint64_t>(sq >> 64);
  lo = static_cast<uint64_t>(sq);
#endif
}

PF_HD inline int leading_zeros(uint64_t x) {  // x != 0
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __clzll(static_cast<long long>(x));
#else
  return __builtin_clzll(x);
#endif
}

// -log2(u) * 2^kRaceBits (truncated) of N draws at once (independent chains
// the CPU overlaps), u = m * 2^-53 for m = (bits >> 11) + 1 in [1, 2^53]:
// below 53 * 2^kRaceBits, so exact as a double. Bit by bit: with m = 2^k x,
// x in [1, 2), squaring x gives the next bit of log2(x) (1 when the square
// is 2 or more, which is then halved).
template <int N>
PF_HD void neg_log2_fixed(const uint64_t* bits, uint64_t* out) {
  uint64_t x[N], frac[N];
  int k[N];
  for (int j = 0; j < N; ++j) {
    const uint64_t m = (bits[j] >> 11) + 1;
    k[j] = 63 - leading_zeros(m);
    x[j] = m << (63 - k[j]);  // x with 63 fraction bits
    frac[j] = 0;
  }
  for (int b = 0; b < kRaceBits; ++b) {
    for (int j = 0; j < N; ++j) {
      uint64_t hi, lo;  // x^2 with 126 fraction bits
      square(x[j], hi, lo);
      const uint64_t bit = hi >> 63;
      frac[j] = (frac[j] << 1) | bit;
      x[j] = (((hi << 1) | (lo >> 63)) >> bit) | (bit << 63);  // no branch: the bits are random
    }
  }
  for (int j = 0; j < N; ++j) out[j] = (static_cast<uint64_t>(53 - k[j]) << kRaceBits) - frac[j];
}

// The race keys of entries i .. i + N - 1 of row `row`: E / w up to a
// constant factor; +inf for a zero weight (never drawn); -1 for a negative,
// inf or NaN one.
template <int N, typename T>
PF_HD void race_keys(const T* p, uint64_t key, int64_t row, int64_t V, int64_t i, double* out) {
  uint64_t bits[N], e[N];
  for (int j = 0; j < N; ++j) bits[j] = random_bits(key, static_cast<uint64_t>(row * V + i + j));
  neg_log2_fixed<N>(bits, e);
  for (int j = 0; j < N; ++j) {
    const double w = static_cast<double>(static_cast<float>(p[row * V + i + j]));
    const bool valid = w >= 0.0 && (w - w) == 0.0;
    out[j] = !valid ? -1.0 : (w > 0.0 ? static_cast<double>(e[j]) / w : static_cast<double>(INFINITY));
  }
}

// Whether entry a comes before entry b in the race (keys ka, kb).
PF_HD inline bool race_before(double ka, int64_t a, double kb, int64_t b) { return ka < kb || (ka == kb && a < b); }

}  // namespace pyflame::sampling
