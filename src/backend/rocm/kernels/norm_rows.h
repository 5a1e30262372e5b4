// The row geometry of norm_rows_cached (norm.hip), shared with the GEMV
// whose prologue forms a norm's sum the same way (gemv.hip).
#pragma once
#include <algorithm>
#include <cstdint>

namespace pyflame::backend::rocm {

constexpr int kCachedMaxThreads = 512;  // register budget of the cached kernel
constexpr int kCachedMaxIters = 8;

// For a row of `slots` vector slots: about four slots per thread, 64 to
// kCachedMaxThreads threads, and the iterations each thread makes. False
// when that is more than kCachedMaxIters (the row takes the generic kernel).
inline bool cached_norm_geometry(int64_t slots, int& threads, int& iters) {
  const int64_t want = ((slots + 3) / 4 + 63) / 64 * 64;
  threads = static_cast<int>(std::clamp<int64_t>(want, 64, kCachedMaxThreads));
  const int64_t n = (slots + threads - 1) / threads;
  iters = static_cast<int>(std::min<int64_t>(n, kCachedMaxIters + 1));
  return n <= kCachedMaxIters;
}

}  // namespace pyflame::backend::rocm
