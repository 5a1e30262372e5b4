// The preimage of a padded axis, shared by the CPU and GPU kernels of
// PadGrad: which output positions read input position i.
#pragma once
#include <cstdint>

#include "pyflame/ops_index.h"

#if defined(__HIPCC__) || defined(__CUDACC__)
#define PF_PAD_HD __host__ __device__
#else
#define PF_PAD_HD
#endif

namespace pyflame {

// Calls f(o) for every o in [0, m) with pad_source(mode, o - lo, n) == i
// (backend/cpu/index.cc), in increasing order within each of at most two
// arithmetic progressions, so a sum over them has a fixed order. Reflect and
// circular sources are periodic in o; replicate's edges take whole ranges.
// Every o in [first, last] (inclusive) that lies in [0, m).
template <typename F>
PF_PAD_HD inline void pad_preimage_range(int64_t first, int64_t last, int64_t m, F& f) {
  if (first < 0) first = 0;
  if (last > m - 1) last = m - 1;
  for (int64_t o = first; o <= last; ++o) f(o);
}

// Every o in [0, m) with o = r (mod period).
template <typename F>
PF_PAD_HD inline void pad_preimage_progression(int64_t r, int64_t period, int64_t m, F& f) {
  for (int64_t o = ((r % period) + period) % period; o < m; o += period) f(o);
}

// Calls f(o) for every o in [0, m) with pad_source(mode, o - lo, n) == i
// (backend/cpu/index.cc), in increasing order within each of at most two
// arithmetic progressions, so a sum over them has a fixed order. Reflect and
// circular sources are periodic in o; replicate's edges take whole ranges.
template <typename F>
PF_PAD_HD inline void for_each_pad_preimage(PadMode mode, int64_t i, int64_t lo, int64_t n,
                                            int64_t m, F& f) {
  if (n <= 0) return;
  switch (mode) {
    case PadMode::Constant: pad_preimage_range(i + lo, i + lo, m, f); return;
    case PadMode::Replicate:
      pad_preimage_range(i == 0 ? 0 : i + lo, i == n - 1 ? m - 1 : i + lo, m, f);
      return;
    case PadMode::Circular: pad_preimage_progression(i + lo, n, m, f); return;
    case PadMode::Reflect:
      if (n == 1) {
        pad_preimage_range(0, m - 1, m, f);
        return;
      }
      pad_preimage_progression(i + lo, 2 * (n - 1), m, f);
      if (i != 0 && i != n - 1) pad_preimage_progression(lo - i, 2 * (n - 1), m, f);  // mirrored
      return;
  }
}

}  // namespace pyflame

#undef PF_PAD_HD
