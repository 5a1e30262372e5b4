#!/usr/bin/env python3
"""PyFlame benchmark suite: the workloads of BENCHMARKS.md, side by side with
PyTorch in the same process, with rates and fractions of the device ceilings
measured in the same run.

  python benchmarks/rocm_benchmark.py --all
  python benchmarks/rocm_benchmark.py --matmul --conv
  python benchmarks/rocm_benchmark.py --iterations 200 --warmup 20
  python benchmarks/rocm_benchmark.py --all --compare torch --json out.json --plot out.png

No group flag means all groups. Progress goes to stderr, the table to stdout.
"""
import argparse
import datetime
import gc
import json
import os
import platform
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ceilings  # noqa: E402
import harness  # noqa: E402
from workloads import GROUPS, WORKLOADS  # noqa: E402

DEFAULT_ITERS = {"gpu": (50, 5), "cpu": (20, 2), "small": (10, 2)}  # (iterations, warm-up)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--all", action="store_true", help="run every group (the default)")
    for g in GROUPS:
        ap.add_argument(f"--{g}", action="store_true", help=f"run the {g} group")
    ap.add_argument("--only", metavar="NAMES", help="comma-separated workload names")
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    ap.add_argument("--device", default="auto", help="auto (default), cpu, rocm or rocm:N")
    ap.add_argument("--dtype", default="float32", choices=list(harness.SHORT_DTYPE),
                    help="dtype of the workloads that do not fix their own (default float32)")
    ap.add_argument("--compare", choices=["torch", "none"], default="none",
                    help="also run the workloads in PyTorch and report ours/PyTorch")
    ap.add_argument("--iterations", type=int,
                    help="timed iterations (default 50 GPU, 20 CPU, 10 --small)")
    ap.add_argument("--warmup", type=int, help="warm-up iterations (default 5 GPU, else 2)")
    ap.add_argument("--max-time", type=float, default=3.0, metavar="S",
                    help="stop timing one workload after S seconds once 3 samples are in (default 3)")
    ap.add_argument("--small", action="store_true", help="tiny sizes, for CI smoke runs")
    ap.add_argument("--seed", type=int, help="RNG seed for the inputs (default: fresh each run)")
    ap.add_argument("--json", metavar="FILE", help="write all numbers and machine info as JSON")
    ap.add_argument("--plot", metavar="FILE.png",
                    help="bar chart of ratios and fractions of ceiling (matplotlib)")
    args = ap.parse_args(argv)
    if (args.iterations or 1) < 1 or (args.warmup or 0) < 0:
        ap.error("--iterations must be at least 1 and --warmup at least 0")
    return args


def select(args):
    groups = [g for g in GROUPS if getattr(args, g)]
    chosen = [w for w in WORKLOADS if args.all or not groups or w.group in groups]
    if args.only:
        names = set(args.only.split(","))
        unknown = names - {w.name for w in WORKLOADS}
        if unknown:
            sys.exit(f"rocm_benchmark: unknown workload(s) {sorted(unknown)}; see --list")
        chosen = [w for w in chosen if w.name in names]
    return chosen


def progress(msg):
    print(msg, file=sys.stderr, flush=True)


def first_line(e):
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]}"


# ------------------------------------------------------------------ timing

class Bench:
    def __init__(self, args, tier):
        self.iterations, self.warmup = DEFAULT_ITERS[tier]
        self.iterations = args.iterations or self.iterations
        self.warmup = self.warmup if args.warmup is None else args.warmup
        self.max_time = args.max_time

    def time(self, F, step, samples=None):
        """Seconds per step (see harness.measure); on a GPU, steps are timed in
        5 batches so one synchronization is spread over many steps."""
        batch = max(1, self.iterations // 5) if F.gpu else 1
        med, s = harness.measure(lambda: F.run(step()), F.sync, self.iterations, self.warmup,
                                 batch, self.max_time)
        if samples is not None:
            samples.extend(s)
        return med


def release(torch_adapter):
    gc.collect()
    if torch_adapter is not None and torch_adapter.gpu:
        torch_adapter.torch.cuda.empty_cache()


def run_workload(w, ctx):
    tier, ours, torch_ = ctx["tier"], ctx["ours"], ctx["torch"]
    r = dict(name=w.name, group=w.group, status="ok", reason=None, note=w.note or None,
             requires=list(w.requires), ours_s=None, torch_s=None, torch_events_s=None,
             torch_status=None, ratio=None, rate=None, torch_rate=None, fraction=None,
             torch_fraction=None, target=None, target_met=None)
    if w.gpu_only and not ours.gpu:
        r.update(size="-", dtype=None, status="n/a", reason="GPU only")
        return r
    p = w.sizes[tier]
    dtype = p.get("dtype", ctx["dtype"])
    items = w.items(p)
    r.update(size=f"{w.label(p)} {harness.SHORT_DTYPE[dtype]}", dtype=dtype, params=p)

    missing = [q for q in w.requires if not harness.has_attr_path(ours.pf, q)]
    if missing:
        r.update(status="n/a", reason="not implemented: " + ", ".join(missing))
    else:
        try:
            samples = []
            r["ours_s"] = ctx["bench"].time(ours, w.build(ours, p, dtype), samples) / items
            r["ours_samples_s"] = [s / items for s in samples]
        except Exception as e:  # noqa: BLE001  (report it in the table, go on)
            r.update(status="error", reason=first_line(e))
        release(torch_)

    if torch_ is not None:
        try:
            step = w.build(torch_, p, dtype)
            r["torch_s"] = ctx["bench"].time(torch_, step) / items
            if torch_.gpu:
                r["torch_events_s"] = harness.cuda_event_median(
                    torch_.torch, step, ctx["bench"].iterations) / items
            r["torch_status"] = "ok"
        except Exception as e:  # noqa: BLE001
            r.update(torch_status="error", torch_reason=first_line(e))
        release(torch_)

    return r


def score(chosen, results, ctx):
    """Ratios, rates, fractions of ceiling and targets, once every workload
    has run: the GEMM workloads' own rates raise the GEMM ceilings (each is
    the best GEMM rate seen in this run), and some targets compare rows."""
    ceil = ctx["ceilings"]
    for w, r in zip(chosen, results):
        if not r.get("params"):
            continue
        p, dtype = r["params"], r["dtype"]
        work = w.work(p, dtype)  # bytes moved or FLOPs per step
        r["rate_unit"] = w.unit or ("B/s" if w.bytes else "FLOP/s")
        for t_key, key in (("ours_s", "rate"), ("torch_s", "torch_rate")):
            if r[t_key]:
                r[key] = 1 / r[t_key] if w.unit else work / (r[t_key] * w.items(p))
        if r["ours_s"] and r["torch_s"]:
            r["ratio"] = r["ours_s"] / r["torch_s"]
        if w.group == "matmul" and dtype in ceil["gemm"]:
            by = ceil["gemm"][dtype]["by"]
            for fw, key in (("pyflame", "rate"), ("pytorch", "torch_rate")):
                if r[key]:
                    by[f"{fw} {w.name}"] = r[key]
            ceil["gemm"][dtype] = ceilings.best(by)
    for w, r in zip(chosen, results):
        if r.get("params"):
            p, dtype = r["params"], r["dtype"]
            peak = ceil["copy"]["value"] if w.bytes else \
                ceil["gemm"].get(dtype, {}).get("value") if w.flops else None
            for t_key, key in (("ours_s", "fraction"), ("torch_s", "torch_fraction")):
                if r[t_key] and peak:
                    r[key] = w.work(p, dtype) / (r[t_key] * w.items(p)) / peak
        target = None if ctx["tier"] == "small" else w.targets.get(ctx["tier"])  # none for smoke sizes
        r["target"] = target.text if target else None
        if target and target.check and r["status"] == "ok":
            r["target_met"] = target.check(r, ctx)


# ----------------------------------------------------------------- output

def si(value, unit):
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, "")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def fmt_time(s):
    if s is None:
        return None
    if s >= 1:
        return f"{s:.3g} s"
    return f"{s * 1e3:.3g} ms" if s >= 1e-3 else f"{s * 1e6:.3g} µs"


def fmt_fraction(f):
    if f is None:
        return "-"
    return f"{f:.0%}" if f >= 0.1 else f"{f:.1%}" if f >= 0.01 else f"{f * 100:.2g}%"


def table(results, compare):
    """One Markdown table: readable in a terminal, pastes into an issue."""
    cols = ["workload", "size", "ours"] + (["PyTorch", "ours/PyTorch"] if compare else []) + \
        ["ours rate", "of ceiling", "target", "note"]
    rows = []
    for r in results:
        ours = fmt_time(r["ours_s"]) or ("n/a" if r["status"] == "n/a" else "error")
        theirs = fmt_time(r["torch_s"]) or ("error" if r["torch_status"] == "error" else "-")
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        rate = "-" if r["rate"] is None else si(r["rate"], r["rate_unit"])
        met = {True: " ✓", False: " ✗"}.get(r["target_met"], "")
        torch_error = r.get("torch_reason") and "PyTorch " + r["torch_reason"]
        note = "; ".join(x for x in (r["reason"], r["note"], torch_error) if x)
        rows.append([r["name"], r["size"], ours] + ([theirs, ratio] if compare else []) +
                    [rate, fmt_fraction(r["fraction"]), (r["target"] or "") + met, note])
    widths = [max(len(str(x)) for x in col) for col in zip(cols, *rows)]

    def line(cells):
        return "| " + " | ".join(str(x).ljust(n) for x, n in zip(cells, widths)) + " |"
    rule = "|" + "|".join("-" * (n + 2) for n in widths) + "|"
    return "\n".join([line(cols), rule] + [line(r) for r in rows])


def header(ctx, machine):
    b, ceil, gpu = ctx["bench"], ctx["ceilings"], ctx["ours"].gpu
    timing = ("PyFlame has no device-event API yet, so each framework runs 5 batches of steps, "
              "each bracketed by a device synchronize and timed with perf_counter; the median "
              "batch gives the time per step. PyTorch is timed the same way so the ratio compares "
              "like with like; its CUDA-event median is in the JSON (torch_events_ms)."
              if gpu else "perf_counter around each step (the CPU runs synchronously), median.")
    copy = ceil["copy"]
    cells = [f"copy {si(copy['value'], 'B/s')} ({copy['source']})" if copy["value"]
             else "copy: failed"]
    cells += [f"GEMM {harness.SHORT_DTYPE[dt]} {si(c['value'], 'FLOP/s')} ({c['source']})"
              for dt, c in ceil["gemm"].items() if c["value"]]
    lines = [
        f"PyFlame {machine['pyflame']} on {machine['device_name']} [{ctx['device']}], "
        f"{ctx['tier']} sizes, {b.iterations} iterations after {b.warmup} warm-up, "
        f"seed {ctx['seed']}, {machine['date']}",
        f"PyTorch {machine['torch']} in the same process, same shapes and dtypes, TF32 off in both."
        if ctx["torch"] else "No PyTorch comparison (--compare torch adds it).",
        f"Timing: {timing}",
        "Ceilings (best measured in this run): " + "; ".join(cells) + ".",
        "Columns: times are per step (per op, token or evaluation for host, llm, multistream); "
        + ("ours/PyTorch is the time ratio, < 1 means PyFlame is faster; " if ctx["torch"] else "")
        + "ours rate counts the minimum bytes moved or the nominal FLOPs; of ceiling = ours rate "
        "/ the ceiling above; target from BENCHMARKS.md (GPU targets were set on an H100), "
        "✓ met, ✗ not.",
    ]
    return "\n".join(lines)


def machine_info(device, torch_):
    import pyflame as pf
    gpu = device != "cpu"
    info = pf.rocm_get_device_info(int(device.split(":")[1])) if gpu else pf.device_info()
    name = info["name"] if gpu else f"{info['name']} ({info['cores']} cores)"
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=5,
                                cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return dict(date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                host=platform.node(), platform=platform.platform(), python=platform.python_version(),
                pyflame=pf.__version__, numpy=np.__version__, git_commit=commit or None,
                torch=torch_.torch.__version__ if torch_ else None,
                torch_device=torch_.torch.cuda.get_device_name(torch_.device)
                if torch_ and torch_.gpu else None,
                device=device, device_name=name, device_info=info, cpu_count=os.cpu_count())


def to_json(results):
    """Results with times in milliseconds (the *_s keys become *_ms)."""
    out = []
    for r in results:
        r = dict(r)
        for k in [k for k in r if k.endswith("_s")]:
            v = r.pop(k)
            r[k[:-2] + "_ms"] = [x * 1e3 for x in v] if isinstance(v, list) else v and v * 1e3
        out.append(r)
    return out


def plot(results, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = [(k, [r for r in results if r[k]]) for k in ("ratio", "fraction")]
    panels = [(k, rows) for k, rows in panels if rows]
    if not panels:
        return False
    height = 1.2 + 0.3 * max(len(rows) for _, rows in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), height), squeeze=False)
    for ax, (key, rows) in zip(axes[0], panels):
        names, vals = [f"{r['name']} {r['size']}" for r in rows], [r[key] for r in rows]
        if key == "ratio":
            bars = ax.barh(names, vals, color=["tab:green" if v <= 1 else "tab:red" for v in vals])
            ax.axvline(1, color="k", lw=0.8)
            ax.set_xscale("log")
            ax.set_xlabel("time ours / PyTorch (< 1: PyFlame faster)")
        else:
            bars = ax.barh(names, vals, color="tab:blue")
            ax.set_xlim(0, max(1.0, max(vals) * 1.05))
            ax.set_xlabel("fraction of measured ceiling (copy bandwidth or GEMM rate)")
        ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=2)
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


# -------------------------------------------------------------------- main

def main(argv=None):
    args = parse_args(argv)
    chosen = select(args)
    if args.list:
        for w in WORKLOADS:
            print(f"{w.group:12} {w.name:16} requires: {', '.join(w.requires) or '-'}")
        return 0
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("rocm_benchmark: --plot needs matplotlib, which is not installed "
                  "(pip install matplotlib)", file=sys.stderr)
            return 2

    import pyflame as pf
    try:
        pf.set_device(args.device)
    except (ValueError, RuntimeError) as e:
        print(f"rocm_benchmark: --device {args.device}: {e}", file=sys.stderr)
        return 2
    device = pf.get_device()
    tier = "small" if args.small else ("cpu" if device == "cpu" else "gpu")
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little") >> 1
    pf.manual_seed(seed)

    torch_ = None
    if args.compare == "torch":
        try:
            torch_ = harness.Torch(device)
            torch_.torch.manual_seed(seed)
        except Exception as e:  # noqa: BLE001  (ImportError, or a PyTorch without this device)
            progress(f"rocm_benchmark: PyTorch unavailable ({first_line(e)}); no PyTorch columns")
    ours = harness.PyFlame(device)
    frameworks = [ours] + ([torch_] if torch_ else [])
    bench = Bench(args, tier)
    ctx = dict(tier=tier, device=device, dtype=args.dtype, seed=seed, ours=ours, torch=torch_,
               bench=bench, results={})

    gemm_dtypes = [dt for dt in harness.SHORT_DTYPE  # the GEMM ceilings the chosen workloads need
                   if any(w.flops and w.sizes.get(tier) and not (w.gpu_only and not ours.gpu)
                          and w.sizes[tier].get("dtype", args.dtype) == dt for w in chosen)]
    ctx["ceilings"] = ceilings.measure(frameworks, tier, gemm_dtypes, bench.time, progress)

    results = []
    for i, w in enumerate(chosen, 1):
        p = w.sizes.get(tier) or {}
        size = w.label(p) if p else "-"
        print(f"[{i}/{len(chosen)}] {w.name} {size} ...", end="", file=sys.stderr, flush=True)
        r = run_workload(w, ctx)
        ctx["results"][w.name] = r
        results.append(r)
        done = fmt_time(r["ours_s"]) or f"{r['status']} ({r['reason']})"
        if r["torch_s"]:
            done += f", PyTorch {fmt_time(r['torch_s'])}"
        print(" " + done, file=sys.stderr, flush=True)
    score(chosen, results, ctx)

    machine = machine_info(device, torch_)
    print(header(ctx, machine))
    print()
    print(table(results, torch_ is not None))

    if args.json:
        config = dict(vars(args), tier=tier, seed=seed, iterations=bench.iterations,
                      warmup=bench.warmup)
        doc = dict(machine=machine, config=config, ceilings=ctx["ceilings"], results=to_json(results))
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1, default=str)
    rc = 0
    if args.plot:
        try:
            title = f"PyFlame on {machine['device_name']}, {machine['date']}"
            if not plot(results, args.plot, title):
                progress("rocm_benchmark: nothing to plot (no ratios or fractions)")
        except Exception as e:  # noqa: BLE001  (the table and JSON are out already)
            progress(f"rocm_benchmark: --plot failed: {first_line(e)}")
            rc = 2
    failed = [r["name"] for r in results if r["status"] == "error"]
    if failed:
        progress(f"rocm_benchmark: PyFlame failed on {', '.join(failed)} (see the note column)")
    return 1 if failed else rc


if __name__ == "__main__":
    sys.exit(main())
