// The platform-neutral C++ API in one include: tensors, ops, autograd, mixed
// precision, devices and the GPU device-management entry points (which report
// no devices in a build without a GPU backend). The GPU layer
// (pyflame/backend/rocm/*.h: memory manager, BLAS, DNN, executor, kernels)
// exists only in GPU builds and is included separately.
#pragma once
#include "pyflame/amp.h"            // NOLINT(build/include_order)
#include "pyflame/autograd.h"       // NOLINT
#include "pyflame/backend/rocm.h"   // NOLINT
#include "pyflame/backend/tuning.h" // NOLINT
#include "pyflame/compile.h"         // NOLINT
#include "pyflame/device.h"         // NOLINT
#include "pyflame/dtype.h"          // NOLINT
#include "pyflame/errors.h"         // NOLINT
#include "pyflame/fusion.h"         // NOLINT
#include "pyflame/ops.h"            // NOLINT
#include "pyflame/tensor.h"         // NOLINT
