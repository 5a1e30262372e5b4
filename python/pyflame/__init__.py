"""PyFlame: a deep-learning tensor framework with a lazy C++ core and a ROCm
(HIP) GPU backend.

Ops record a graph; evaluation happens on ``.numpy()``, ``.item()``, ``print``,
``pf.eval(...)`` and ``pf.synchronize()``.
"""
import os as _os

# OpenMP worker threads sleep when idle instead of spinning: spinning workers
# steal the cores that OpenBLAS and other processes need on small machines.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from . import _core  # noqa: E402
from ._core import *  # noqa: F401,F403  (every public op of the core)
from ._core import (  # noqa: F401
    Dtype, Tensor, OutOfMemoryError,
    add, sub, mul, div, pow, maximum, minimum, neg, abs, sqrt, exp, log, sin, cos, tanh,
    relu, sigmoid, gelu, silu, eq, ne, lt, le, gt, ge, where, clamp, astype, contiguous,
    flatten, swapaxes, unsqueeze, matmul, sum, mean, max, min, prod, softmax, log_softmax,
    manual_seed, set_device, get_device, synchronize,
    rocm_is_available, rocm_device_count, rocm_get_device_info, rocm_set_device,
    rocm_get_device, rocm_synchronize,
)
from .ops import (  # noqa: F401
    tensor, asarray, zeros, ones, full, arange, eye, rand, randn, randint,
    zeros_like, ones_like, reshape, transpose, squeeze, broadcast_to, eval, device_info,
)
from . import _tensor_methods  # noqa: F401  (adds methods and repr to Tensor)
from . import backend  # noqa: F401
from . import nn  # noqa: F401

float32 = Dtype.float32
float16 = Dtype.float16
bfloat16 = Dtype.bfloat16
int32 = Dtype.int32
int64 = Dtype.int64
bool_ = Dtype.bool
half = float16
float = float32  # noqa: A001  (torch-style alias)
long = int64

__version__ = "0.1.0"
