"""Gradient checks shared by the autograd tests.

``check_vs_torch`` runs a function on PyFlame tensors (on the test's device)
and the same function on CPU torch tensors, backpropagates the same random
cotangent through both, and compares every input's gradient.

``check_finite_differences`` compares PyFlame's gradient with central
differences of the PyFlame function itself, in float32 (a step suited to
float32 and a matching tolerance) or, with ``dtype="float64"``, in float64
with a small step and a tight tolerance (for ops whose kernels compute in
double); the torch comparison is the tight check.

Both take NumPy inputs (float64 values exactly representable in float32)
and build fresh leaves from them.
"""
import numpy as np

import pyflame as pf


def _pf_leaves(arrays, device, dtype="float32", grad_mask=None):
    leaves = []
    for i, a in enumerate(arrays):
        a = np.asarray(a)
        if a.dtype.kind == "f":
            t = pf.tensor(a.astype(np.float64 if dtype == "float64" else np.float32), device=device)
            if str(t.dtype) != dtype:
                t = t.astype(dtype)
            wants = grad_mask is None or grad_mask[i]
            if wants:
                t = pf.detach(t)
                t.requires_grad = True
        else:
            t = pf.tensor(a, device=device)
        leaves.append(t)
    return leaves


def pf_grads(fn, arrays, device, cotangent=None, dtype="float32", grad_mask=None):
    """(output as float64 NumPy, [grad or None per input]) for fn on PyFlame."""
    leaves = _pf_leaves(arrays, device, dtype, grad_mask)
    out = fn(*leaves)
    assert out.device.split(":")[0] == ("cpu" if device == "cpu" else "rocm"), \
        f"output on {out.device}, expected {device}"
    if cotangent is None:
        cot = pf.ones(*out.shape, dtype=out.dtype, device=device)
    else:
        cot = pf.tensor(np.asarray(cotangent, np.float64), device=device).astype(out.dtype)
    out.backward(cot)
    grads = []
    for t in leaves:
        if t.requires_grad:
            assert t.grad is not None, "no gradient reached an input that requires grad"
            assert t.grad.device == t.device, f"gradient on {t.grad.device}, input on {t.device}"
            assert tuple(t.grad.shape) == tuple(t.shape)
            assert t.grad.dtype == t.dtype, f"gradient dtype {t.grad.dtype}, input {t.dtype}"
            grads.append(t.grad.astype("float64").numpy())
        else:
            grads.append(None)
    return out.astype("float64").numpy(), grads


def torch_grads(torch_fn, arrays, cotangent=None, grad_mask=None):
    """The reference: the same computation in CPU torch, float64."""
    import torch
    leaves = []
    for i, a in enumerate(arrays):
        a = np.asarray(a)
        if a.dtype.kind == "f":
            wants = grad_mask is None or grad_mask[i]
            leaves.append(torch.tensor(a.astype(np.float64), requires_grad=wants))
        else:
            leaves.append(torch.tensor(a))
    out = torch_fn(*leaves)
    cot = torch.ones_like(out) if cotangent is None else torch.tensor(
        np.asarray(cotangent, np.float64))
    out.backward(cot)
    grads = [t.grad.numpy() if (t.requires_grad and t.grad is not None)
             else (np.zeros(t.shape) if t.requires_grad else None) for t in leaves]
    return out.detach().numpy(), grads


def check_vs_torch(fn, torch_fn, arrays, device, rtol=1e-4, atol=1e-5, grad_mask=None,
                   dtype="float32", random_cotangent=True):
    """Asserts that PyFlame's gradients of fn match torch's on the same inputs."""
    out_ref, ref = torch_grads(torch_fn, arrays, None, grad_mask)
    cot = np.random.uniform(-1, 1, size=np.shape(out_ref)) if random_cotangent else None
    if cot is not None:
        cot = cot.astype(np.float32).astype(np.float64)
        out_ref, ref = torch_grads(torch_fn, arrays, cot, grad_mask)
    out, got = pf_grads(fn, arrays, device, cot, dtype, grad_mask)
    np.testing.assert_allclose(out, out_ref, rtol=rtol, atol=atol, err_msg="forward")
    for i, (g, r) in enumerate(zip(got, ref)):
        if r is None:
            continue
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol, err_msg=f"gradient of input {i}")


def check_finite_differences(fn, arrays, device, eps=None, rtol=None, atol=None, samples=12,
                             grad_mask=None, dtype="float32"):
    """Compares directional derivatives: <grad, v> against (f(x+eps v) - f(x-eps v)) / 2eps
    for random directions v, with f reduced by a fixed random cotangent. The
    defaults of eps, rtol and atol suit ``dtype`` (float32 or float64)."""
    f64 = dtype == "float64"
    eps = eps if eps is not None else (1e-6 if f64 else 1e-2)
    rtol = rtol if rtol is not None else (1e-6 if f64 else 2e-2)
    atol = atol if atol is not None else (1e-8 if f64 else 2e-3)
    arrays = [np.asarray(a) for a in arrays]
    out, _ = pf_grads(fn, arrays, device, None, dtype, grad_mask)
    cot = np.random.uniform(-1, 1, size=out.shape).astype(np.float32).astype(np.float64)
    _, grads = pf_grads(fn, arrays, device, cot, dtype, grad_mask)
    fdt = np.float64 if f64 else np.float32

    def value(arrs):
        with pf.no_grad():
            ts = [pf.tensor(a.astype(fdt) if a.dtype.kind == "f" else a, device=device)
                  for a in arrs]
            return float((fn(*ts).astype("float64").numpy() * cot).sum())

    for _ in range(samples):
        dirs = [np.random.uniform(-1, 1, size=a.shape) if g is not None else None
                for a, g in zip(arrays, grads)]
        plus = [a + eps * d if d is not None else a for a, d in zip(arrays, dirs)]
        minus = [a - eps * d if d is not None else a for a, d in zip(arrays, dirs)]
        numeric = (value(plus) - value(minus)) / (2 * eps)
        analytic = sum(float((g * d).sum()) for g, d in zip(grads, dirs) if d is not None)
        assert abs(numeric - analytic) <= atol + rtol * max(abs(numeric), abs(analytic)), \
            f"directional derivative {analytic} vs finite difference {numeric}"
