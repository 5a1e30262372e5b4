// Generated GPU source for a fused region: one `extern "C" __global__`
// kernel taking one by-value argument block, compiled at run time by NVRTC
// (NVIDIA) or hipRTC (AMD). Sizes, strides, addresses and scalar values are
// arguments; only the tape, dtypes, access kinds and axis count shape the
// source, so one compiled kernel serves every call of the same pattern.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/fused.h"

namespace pyflame::fuse {

enum class Access : uint8_t { Contig, Scalar, Strided };

// How the kernel reads each load over the region's index space: the shape
// with size-1 axes dropped and axes merged where every strided load allows.
struct KernelLayout {
  std::vector<Access> access;         // per load
  Shape shape;                        // collapsed; empty when no load is strided
  std::vector<Strides> strides;       // per load (those read Strided only)
  bool narrow = false;  // every index and offset fits 32 bits: cheaper index arithmetic
};
KernelLayout kernel_layout(const FusedRegion& r);

constexpr int kMaxKernelAxes = 8;

struct KernelSource {
  std::string name;    // pf_fused_<hash of the source>; a reduction's second pass is <name>_parts
  std::string source;  // complete: preamble, formulas, kernel
};
KernelSource kernel_source(const FusedRegion& r, const KernelLayout& L, int wave_size);

// A reduction region's launch geometry (the prebuilt reduce kernel's: see
// backend/rocm/fused.cc): rows of `cols` values, `chunks` blocks a row, the
// PF_VEC-wide path when `vec`, the per-chunk results in `partial`.
struct ReduceGeometry {
  int64_t rows = 0, cols = 0, chunks = 1;
  bool vec = false;
  void* partial = nullptr;
};

// The argument block, 8 bytes a field in the order the source declares:
// n, shape[nd], strides[strided loads][nd], inputs[], outputs[] (as
// r.outputs), scalars[], and for a reduction rows, cols, chunks, vec, partial.
std::vector<int64_t> kernel_args(const FusedRegion& r, const KernelLayout& L, const std::vector<const void*>& in,
                                 const std::vector<void*>& out, const ReduceGeometry& g = {});

// The text of backend/elementwise_formulas.h (embedded at build time).
extern const char* const kFormulasText;

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull);

}  // namespace pyflame::fuse
