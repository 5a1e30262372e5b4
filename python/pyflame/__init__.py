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
from ._core import *  # noqa: F401,F403,E402  (every public op, Tensor, OutOfMemoryError)
from ._core import Dtype  # noqa: E402
from .ops import (  # noqa: F401
    tensor, asarray, zeros, ones, full, arange, eye, rand, randn, randint,
    zeros_like, ones_like, reshape, transpose, squeeze, broadcast_to, eval, device_info,
    unsqueeze, flatten, swapaxes, split, chunk, where, contiguous,
)
from ._inplace import masked_fill, scatter, index_add  # noqa: F401
from ._einsum import einsum  # noqa: F401
from . import _tensor_methods  # noqa: F401  (adds methods and repr to Tensor)
from . import linalg  # noqa: F401,E402
from . import array_api  # noqa: F401,E402
from .array_api import _array as _array_api_object  # noqa: E402

_array_api_object.install(Tensor)  # noqa: F405
from . import autograd  # noqa: F401
from .autograd import (  # noqa: F401
    no_grad, enable_grad, set_grad_enabled, is_grad_enabled, grad, value_and_grad,
)
from . import backend  # noqa: F401
from . import nn  # noqa: F401
from . import amp, optim, utils  # noqa: F401,E402
from . import distributed  # noqa: F401,E402
from ._dlpack import from_dlpack  # noqa: F401,E402
from .serialization import save, load  # noqa: F401,E402
from ._dtypes import finfo, iinfo  # noqa: F401,E402
from ._compile import compile  # noqa: F401,E402,A004

float32 = Dtype.float32
float16 = Dtype.float16
bfloat16 = Dtype.bfloat16
int32 = Dtype.int32
int64 = Dtype.int64
float64 = Dtype.float64
int8 = Dtype.int8
int16 = Dtype.int16
uint8 = Dtype.uint8
bool_ = Dtype.bool
half = float16
float = float32  # noqa: A001  (torch-style alias)
double = float64
long = int64
short = int16

__version__ = "0.1.0"
