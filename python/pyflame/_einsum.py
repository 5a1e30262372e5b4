"""pf.einsum: Einstein summation reduced to diagonals, sums, transposes,
reshapes and (batched) matmuls, so gradients come from those ops."""
import string

from . import _core
from ._core import Tensor

_LETTERS = set(string.ascii_letters)


def _parse(equation, operands):
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"[einsum] the equation has {len(terms)} operands but "
                         f"{len(operands)} tensors were given")
    # Ellipsis axes become characters outside the letters, aligned right.
    n_ell = 0
    for term, x in zip(terms, operands):
        if term.count("...") > 1 or (term.replace("...", "").strip(string.ascii_letters)):
            raise ValueError(f"[einsum] invalid subscripts {term!r}")
        if "..." in term:
            n_ell = max(n_ell, x.ndim - (len(term) - 3))
    ell = [chr(0x100 + i) for i in range(n_ell)]
    subs = []
    for term, x in zip(terms, operands):
        if "..." in term:
            k = x.ndim - (len(term) - 3)
            if k < 0:
                raise ValueError(f"[einsum] subscripts {term!r} have more axes than the "
                                 f"operand's {x.ndim}")
            a, b = term.split("...")
            s = list(a) + ell[n_ell - k:] + list(b)
        else:
            s = list(term)
        if len(s) != x.ndim:
            raise ValueError(f"[einsum] subscripts {term!r} do not match an operand with "
                             f"{x.ndim} axes")
        subs.append(s)
    if arrow:
        if rhs.count("...") > 1 or rhs.replace("...", "").strip(string.ascii_letters):
            raise ValueError(f"[einsum] invalid output subscripts {rhs!r}")
        a, _, b = rhs.partition("...")
        out = list(a) + (ell if "..." in rhs else []) + list(b)
        if "..." not in rhs and n_ell and any(ell_c in s for s in subs for ell_c in ell):
            raise ValueError("[einsum] the output must contain ... when the inputs do")
        if len(set(out)) != len(out):
            raise ValueError(f"[einsum] output subscript repeated in {rhs!r}")
        seen = {c for s in subs for c in s}
        for c in out:
            if c not in seen:
                raise ValueError(f"[einsum] output subscript {c!r} does not appear in the inputs")
    else:  # implicit: ellipsis, then letters seen once, sorted
        counts = {}
        for s in subs:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        out = ell + sorted(c for c, n in counts.items() if n == 1 and c in _LETTERS)
    return subs, out


def _diagonal(x, s):
    """Folds repeated subscripts of one operand onto their diagonal."""
    while len(set(s)) != len(s):
        c = next(c for c in s if s.count(c) > 1)
        i = s.index(c)
        j = s.index(c, i + 1)
        n = x.shape[i]
        if x.shape[j] != n:
            raise ValueError(f"[einsum] subscript {c!r} has sizes {n} and {x.shape[j]}")
        shape = [1] * x.ndim
        shape[i], shape[j] = n, n
        eye = _core.reshape(_core.eye(n, n, 0, x.dtype, x.device), shape)
        x = _core.sum(x * eye, [j])
        s = s[:j] + s[j + 1:]
    return x, s


def _sum_out(x, s, keep):
    axes = [i for i, c in enumerate(s) if c not in keep]
    if not axes:
        return x, s
    return _core.sum(x, axes), [c for c in s if c in keep]


def _permute(x, s, order):
    perm = [s.index(c) for c in order]
    if perm != list(range(len(perm))):
        x = _core.transpose(x, perm)
    return x


def _contract(a, sa, b, sb, keep, sizes):
    """a (subscripts sa) times b summed over the shared subscripts not in keep."""
    batch = [c for c in sa if c in sb and c in keep]
    contracted = [c for c in sa if c in sb and c not in keep]
    a_only = [c for c in sa if c not in sb]
    b_only = [c for c in sb if c not in sa]
    full = lambda cs: [sizes[c] for c in cs]  # noqa: E731
    a = _core.broadcast_to(_permute(a, sa, batch + a_only + contracted),
                           full(batch) + [a.shape[sa.index(c)] for c in a_only] + full(contracted))
    b = _core.broadcast_to(_permute(b, sb, batch + contracted + b_only),
                           full(batch) + full(contracted) + [b.shape[sb.index(c)] for c in b_only])
    nb, m, k = _prod(full(batch)), _prod(a.shape[len(batch):len(batch) + len(a_only)]), \
        _prod(full(contracted))
    n = _prod(b.shape[len(batch) + len(contracted):])
    if a.dtype.is_floating_point and b.dtype.is_floating_point:
        r = _core.matmul(_core.reshape(a, [nb, m, k]), _core.reshape(b, [nb, k, n]))
    else:  # integer matmul: broadcast multiply and sum
        r = _core.sum(_core.reshape(a, [nb, m, k, 1]) * _core.reshape(b, [nb, 1, k, n]), [2])
    shape = full(batch) + list(a.shape[len(batch):len(batch) + len(a_only)]) + \
        list(b.shape[len(batch) + len(contracted):])
    return _core.reshape(r, shape), batch + a_only + b_only


def _prod(xs):
    p = 1
    for v in xs:
        p *= v
    return p


def einsum(equation, *operands):
    """torch.einsum / numpy.einsum: ``pf.einsum("bij,bjk->bik", a, b)``;
    ellipsis and implicit output supported; size-1 axes broadcast."""
    if not isinstance(equation, str):
        raise TypeError(f"[einsum] equation must be a string, got {type(equation).__name__}")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ValueError("[einsum] at least one operand is required")
    for x in operands:
        if not isinstance(x, Tensor):
            raise TypeError(f"[einsum] operands must be pyflame.Tensors, got {type(x).__name__}")
    subs, out = _parse(equation, operands)
    sizes = {}
    for x, s in zip(operands, subs):
        for c, n in zip(s, x.shape):
            if c in sizes and sizes[c] != n and 1 not in (n, sizes[c]):
                raise ValueError(f"[einsum] subscript {c!r} has sizes {sizes[c]} and {n}")
            sizes[c] = n if c not in sizes or sizes[c] == 1 else sizes[c]
    terms = [_diagonal(x, list(s)) for x, s in zip(operands, subs)]
    # Sum each axis away in the first operand where nothing else needs it.
    x, s = terms[0]
    for i in range(len(terms)):
        later = {c for _, t in terms[i + 1:] for c in t}
        if i > 0:
            y, t = terms[i]
            y, t = _sum_out(y, t, set(out) | later | set(s))
            x, s = _sum_out(x, s, set(out) | later | set(t))
            x, s = _contract(x, s, y, t, set(out) | later, sizes)
        else:
            x, s = _sum_out(x, s, set(out) | later)
    # Size-1 axes that broadcast against nothing keep the size they had.
    x = _permute(x, s, out)
    target = [sizes[c] if c in s else 1 for c in out]
    if list(x.shape) != target:
        x = _core.broadcast_to(x, target)
    return x
