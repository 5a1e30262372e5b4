// The whole GPU layer of the C++ API (GPU builds only), with the
// platform-neutral API: device management, memory manager and pinned pool,
// BLAS, DNN, executor, tuning cache, kernel launchers and the check macros.
#pragma once
#include "pyflame/pyflame.h"                 // NOLINT(build/include_order)
#include "pyflame/backend/rocm/blas.h"       // NOLINT
#include "pyflame/backend/rocm/dnn.h"        // NOLINT
#include "pyflame/backend/rocm/executor.h"   // NOLINT
#include "pyflame/backend/rocm/hip_check.h"  // NOLINT
#include "pyflame/backend/rocm/kernels.h"    // NOLINT
#include "pyflame/backend/rocm/memory.h"     // NOLINT
