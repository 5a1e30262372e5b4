// The copy node of a graph replay's inputs and results (graph_io.h): block
// row y copies table entry y; 16-byte words where both ends are aligned.
#include <algorithm>

#include "backend/rocm/graph_io.h"

namespace pyflame::backend::rocm {

namespace {

constexpr int kCopyThreads = 256;
constexpr uint64_t kMaxCopyBlocks = 1024;

__global__ void __launch_bounds__(kCopyThreads) graph_copies_kernel(const GraphCopy* table) {
  const GraphCopy c = table[blockIdx.y];
  const uint64_t step = uint64_t(gridDim.x) * blockDim.x;
  const uint64_t first = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  auto* d = static_cast<unsigned char*>(c.dst);
  const auto* s = static_cast<const unsigned char*>(c.src);
  uint64_t head = 0;  // bytes copied as words
  if (((reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s)) & 15) == 0) {
    head = c.bytes & ~uint64_t(15);
    auto* dw = reinterpret_cast<uint4*>(d);
    const auto* sw = reinterpret_cast<const uint4*>(s);
    for (uint64_t i = first; i < head / 16; i += step) dw[i] = sw[i];
  }
  for (uint64_t i = head + first; i < c.bytes; i += step) d[i] = s[i];
}

}  // namespace

hipError_t add_graph_copies(hipGraph_t graph, const hipGraphNode_t* deps, size_t ndeps, const GraphCopy* table,
                            int n, uint64_t max_bytes, hipGraphNode_t* node) {
  const uint64_t per_block = uint64_t(kCopyThreads) * 16;
  const uint64_t blocks = std::clamp<uint64_t>((max_bytes + per_block - 1) / per_block, 1, kMaxCopyBlocks);
  void* args[] = {&table};
  hipKernelNodeParams p{};
  p.func = reinterpret_cast<void*>(&graph_copies_kernel);
  p.gridDim = dim3(unsigned(blocks), unsigned(n), 1);
  p.blockDim = dim3(kCopyThreads, 1, 1);
  p.sharedMemBytes = 0;
  p.kernelParams = args;
  p.extra = nullptr;
  return hipGraphAddKernelNode(node, graph, deps, ndeps, &p);
}

}  // namespace pyflame::backend::rocm
