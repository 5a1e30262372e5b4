// Geometry of the GPU row reductions, shared by the prebuilt kernel (rocm/kernels/reduce.hip)
// and the fused reductions (ir/passes/fuse_source.cc writes the kernel, rocm/fused.cc launches
// it): both must combine in the same order to give the same bits. No GPU headers: the IR pass
// includes it too.
#pragma once
#include <algorithm>
#include <cstdint>

namespace pyflame::backend {

// Rows of at least `threads` elements: `threads` per block, each thread with `loads` loads in
// flight (as many accumulators, combined in order at the end), and when there are too few rows
// to fill the device, rows split so that about `blocks_per_sm` blocks run per multiprocessor
// (the prebuilt kernel's registers are capped for that many on NVIDIA). Shorter rows: one
// kShortRowThreads block each, one load at a time. On an H100, {256, 4, 4} sums 64M floats
// at 99.6% of a device-to-device copy's rate; 8 blocks per SM, 512 threads or 8 loads each
// measured 2.5-4% slower.
struct ReduceShape {
  int threads;
  int loads;
  int blocks_per_sm;
};
inline constexpr ReduceShape kReduce{256, 4, 4};
inline constexpr int kShortRowThreads = 64;
// The most rows a reduction splits (one arrival counter each) and chunks per row.
inline constexpr int kMaxSplitRows = 4096;
inline constexpr int64_t kMaxChunks = 4096;

inline int reduce_threads(int64_t cols) { return cols >= kReduce.threads ? kReduce.threads : kShortRowThreads; }

// Blocks per row: 1, or enough to fill the device when there are few rows, with at least 16
// elements per thread.
inline int64_t reduce_chunks(int64_t rows, int64_t cols, int multiprocessors) {
  if (cols < kReduce.threads || rows >= 2 * int64_t(multiprocessors) || rows > kMaxSplitRows) return 1;
  const int64_t want = (int64_t(kReduce.blocks_per_sm) * multiprocessors + rows - 1) / rows;
  const int64_t useful = (cols + int64_t(kReduce.threads) * 16 - 1) / (int64_t(kReduce.threads) * 16);
  return std::max<int64_t>(1, std::min<int64_t>({want, useful, kMaxChunks}));
}

}  // namespace pyflame::backend
