"""The Python Array API standard (data-apis.org) for PyFlame tensors.

``x.__array_namespace__()`` returns this module. It implements the 2024.12
revision's functions for the real dtypes PyFlame has (complex dtypes are not
supported), plus the ``linalg`` extension; see docs/array_api.md for the
function-by-function status. Tensors are lazy: functions record graph nodes,
except ``nonzero`` and ``unique_*`` (data-dependent shapes), which evaluate
their input when called.
"""
import math as _math

from .. import _core
from . import _dtypes
from ._creation import (  # noqa: F401
    arange, asarray, astype, empty, empty_like, eye, from_dlpack, full, full_like, linspace, meshgrid,
    ones, ones_like, tril, triu, zeros, zeros_like,
)
from ._dtypes import (  # noqa: F401
    __array_namespace_info__, can_cast, finfo, iinfo, isdtype, result_type,
)
from ._elementwise import *  # noqa: F401,F403
from ._elementwise import clip, conj, imag, positive, real, reciprocal, square  # noqa: F401
from ._manipulation import (  # noqa: F401
    broadcast_arrays, broadcast_shapes, broadcast_to, concat, expand_dims, flip, moveaxis,
    permute_dims, repeat, reshape, roll, squeeze, stack, take, take_along_axis, tile, unstack,
)
from ._reductions import (  # noqa: F401
    all, any, argmax, argmin, argsort, count_nonzero, cumulative_prod, cumulative_sum, diff,
    max, mean, min, nonzero, prod, searchsorted, sort, std, sum, unique_all, unique_counts,
    unique_inverse, unique_values, var, where,
)
from .. import linalg  # noqa: F401,E402
from ..linalg import matmul, matrix_transpose, tensordot, vecdot  # noqa: F401,E402

# The newest revision whose every required function and behaviour is met for
# real dtypes; docs/array_api.md lists what the 2024.12 revision adds and
# what is still missing.
__array_api_version__ = "2024.12"

# Dtype objects.
bool = _dtypes.bool  # noqa: A001
for _d in _dtypes.all_dtypes:
    globals()[str(_d)] = _d
del _d

e = _math.e
inf = _math.inf
nan = _math.nan
pi = _math.pi
newaxis = None

Array = _core.Tensor
