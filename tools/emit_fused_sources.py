#!/usr/bin/env python3
"""Writes the generated GPU source of a representative set of fused regions
(every dtype the GPU fuses, broadcast / strided / scalar loads, comparisons, where, casts,
the MLP epilogues, an Adam-like update storing several outputs, reductions with
an elementwise prologue) to OUTDIR/<kernel>.hip, for the
AMD and NVIDIA compile checks: run-time compiled kernels are then compiled
for every target in CI, not only on the machine that first runs them.

    python tools/emit_fused_sources.py OUTDIR [--wave-size 32|64]
"""
import argparse
import os

import numpy as np

import pyflame as pf


def graphs():
    """(label, tensors) pairs; the regions evaluating the tensors are emitted."""
    rng = np.random.default_rng(0)

    def t(shape, dtype="float32"):
        x = pf.tensor(rng.standard_normal(shape).astype(np.float32))
        return x if dtype == "float32" else x.astype(dtype)

    out = []
    for dt in ("float32", "float16", "bfloat16"):
        x, w, b = t((64, 32), dt), t((32,), dt), t((32,), dt)
        out.append((f"gelu_mul_add_{dt}", [pf.gelu(x * w + b)]))
        out.append((f"every_unary_{dt}", [pf.erf(pf.silu(pf.sigmoid(pf.relu(pf.tanh(pf.cos(pf.sin(
            pf.log(pf.exp(pf.sqrt(pf.abs(pf.neg(x)))))))))))) + pf.gelu(x, approximate="tanh")]))
        out.append((f"binary_compare_where_{dt}", [pf.where(x > w, pf.maximum(x, b) / (x - w),
                                                            pf.minimum(x, w) ** b)]))
        out.append((f"strided_{dt}", [pf.relu(t((32, 64), dt).T * 2.0 + x[:, ::2].sum(axis=1, keepdim=True) + x)]))
    for dt in ("int32", "int64"):
        i = pf.tensor(rng.integers(-9, 9, (16, 8)).astype(np.int64 if dt == "int64" else np.int32))
        out.append((f"int_ops_{dt}", [pf.relu(pf.abs(-(i * i + 3) - i) * 2 + pf.maximum(i, i - 1))]))
        out.append((f"int_casts_{dt}", [(i.astype("float32") * 0.5).astype(dt) + i]))
    d, e = t((32, 16), "float64"), t((16,), "float64")
    u = d
    for name in ("neg", "abs", "sqrt", "exp", "log", "sin", "cos", "tanh", "relu", "sigmoid", "silu", "erf"):
        u = getattr(pf, name)(u)
    out.append(("every_unary_float64", [u + pf.gelu(d) * pf.gelu(d, approximate="tanh")]))
    out.append(("float64_binary_casts", [pf.where(d > e, d ** e, pf.maximum(d, e) / (d - 0.5)),
                                         (d * 300.0).astype("int8"), d.astype("float16") * 2, d != 0]))
    for dt in ("int8", "int16", "uint8"):
        i = pf.tensor(rng.integers(-9, 9, (16, 8)).astype(np.int64)).astype(dt)
        f = t((16, 8)) * 100.0
        out.append((f"small_int_ops_{dt}", [pf.maximum(-(i * i + 3) - i, pf.abs(i) * 2) + pf.relu(i)]))
        out.append((f"small_int_casts_{dt}", [f.astype(dt) + (i.astype("float16") * 0.5).astype(dt), i > 2]))
    c = t((16, 8)) > 0
    out.append(("bool_ops", [pf.where(c, 1.0, t((16, 8))).astype("bool") + c]))
    out.append(("clamp_cast_f16", [pf.clamp(t((8, 8)), -1, 1).astype("float16") * 3]))
    a, w1, b1 = t((32, 64)), t((64, 16)), t((16,))
    out.append(("matmul_bias_relu", [pf.relu(pf.matmul(a, w1) + b1)]))
    p, g, m, v = t((128,)), t((128,)), t((128,)), t((128,))
    m2 = m * 0.9 + g * 0.1
    v2 = v * 0.999 + g * g * 0.001
    # m2 and v2 are outputs too: one region stores all three (multi-output).
    out.append(("adam_like", [p - 0.01 * (m2 / 0.1) / (pf.sqrt(v2 / 0.001) + 1e-8), m2, v2]))
    h = t((8, 16), "float16") * 2.0
    out.append(("multi_output_f16_bool", [pf.exp(h) + 1.0, h, h > 1.0]))
    # Reductions with an elementwise prologue (one kernel, or two when rows are split).
    for dt in ("float32", "float16", "bfloat16"):
        x, y = t((64, 300), dt), t((64, 300), dt)
        out.append((f"reduce_sum_squares_{dt}", [(x * x).sum(axis=1)]))
        out.append((f"reduce_mean_xy_{dt}", [(x * y).mean()]))
    x, y = t((4, 8, 30)), t((30,))
    out.append(("reduce_max_strided", [pf.exp(x.transpose(1, 0, 2) - y).max(axis=-1)]))
    out.append(("reduce_min_scalar", [pf.abs(x - 0.5).min(axis=(1, 2))]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--wave-size", type=int, default=32)
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    was = pf.get_fusion()
    pf.set_fusion(True)
    names = set()
    for label, tensors in graphs():
        for name, src in pf._core._fused_sources(tensors, args.wave_size):
            if name in names:
                continue
            names.add(name)
            with open(os.path.join(args.outdir, f"{name}.hip"), "w") as f:
                f.write(f"// {label}\n{src}")
    pf.set_fusion(was)
    print(f"[emit] {len(names)} fused kernel sources in {args.outdir}")


if __name__ == "__main__":
    main()
