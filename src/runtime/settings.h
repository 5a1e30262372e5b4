// Every PYFLAME_* environment setting, read here and nowhere else. Each
// value is read once, on first use; switches that can also be changed at run
// time (TF32, fusion) take their start value from here.
//
//   PYFLAME_ALLOW_TF32=1   TF32 for float32 GEMMs and convolutions (NVIDIA)
//   PYFLAME_GPU_POISON=1   fill fresh GPU allocations with 0xff (finds reads of unwritten memory)
//   PYFLAME_FUSION=0       no automatic fusion (see docs/design/fusion.md)
//   PYFLAME_FUSION_GPU=0   no fusion on GPUs (run-time compiled kernels), CPU
//                          fusion left on
//   PYFLAME_CACHE_DIR=dir  where compiled kernels are kept; default
//                          $XDG_CACHE_HOME/pyflame, else ~/.cache/pyflame
//   PYFLAME_CONV_LAYOUT=nchw|nhwc  GPU convolutions: never channels-last,
//                          or channels-last for every floating type and
//                          channel count; default auto (backend/rocm/dnn.h)
//   PYFLAME_CUDNN_GRAPH=0  16-bit channels-last convolutions through cuDNN's
//                          legacy API, not its graph API (backend/rocm/dnn.h)
//   PYFLAME_CPU_ISA=sse2   the CPU's vectorized math in its baseline (SSE2)
//                          build even where AVX2 is there (backend/cpu/vec_math.h)
//   PYFLAME_NUM_THREADS=n  threads of the CPU kernels; default OMP_NUM_THREADS
//                          where set, else every core the process may use (not
//                          OpenMP's current default, which another library in
//                          the process, PyTorch for one, may have lowered)
#pragma once
#include <string>

namespace pyflame::settings {

bool allow_tf32();
bool gpu_poison();
bool fusion();
bool fusion_gpu();
bool cpu_baseline_isa();
// PYFLAME_NUM_THREADS, else OMP_NUM_THREADS; 0 where neither is a positive count.
int cpu_threads();
enum class ConvLayout { Auto, Nchw, Nhwc };
ConvLayout conv_layout();
// PYFLAME_GRAPH_REPLAY=0: compiled functions replay their programs op by op,
// never as a captured GPU graph.
bool graph_replay();
bool cudnn_graph();
// Empty when no directory can be named (no HOME): the disk cache is then off.
const std::string& cache_dir();

}  // namespace pyflame::settings
