// The GPU layer of the C++ API (pyflame/backend/rocm/*.h) exists only in a
// GPU build of PyFlame: it includes the GPU runtime (HIP on AMD; CUDA through
// the backend's alias header on NVIDIA) and the BLAS/DNN library headers. A
// build without a GPU backend does not install it; including it there stops
// here with a clear message. The platform-neutral API is pyflame/pyflame.h.
#pragma once

#if !defined(__HIP_PLATFORM_AMD__) && !defined(PYFLAME_GPU_CUDA)
#error "pyflame/backend/rocm/*.h need a GPU build of PyFlame (PYFLAME_GPU=ROCM or CUDA; CMake: PyFlame_HAS_GPU). Without one, use pyflame/pyflame.h."
#endif
