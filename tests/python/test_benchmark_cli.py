"""Smoke test of the benchmark CLI (benchmarks/rocm_benchmark.py): a tiny
--all run on the CPU must time every workload PyFlame can run and mark the
others n/a, never crash."""
import json
import os
import subprocess
import sys

import pyflame as pf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "rocm_benchmark.py")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from harness import has_attr_path  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

ALWAYS_IMPLEMENTED = {"add", "gelu(x*w+b)", "sum", "softmax", "gemm_f32", "gemm_bf16", "mlp_forward",
                      "host_record", "host_eager", "host_eager_scalar"}


def test_all_small_on_cpu(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--all", "--small", "--iterations", "2", "--warmup", "1",
         "--device", "cpu", "--json", str(out)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| workload" in proc.stdout and "[1/" in proc.stderr  # the table, the progress lines

    doc = json.loads(out.read_text())
    assert doc["machine"]["device"] == "cpu" and doc["config"]["tier"] == "small"
    results = {r["name"]: r for r in doc["results"]}
    assert set(results) == {w.name for w in WORKLOADS}
    for w in WORKLOADS:
        r = results[w.name]
        if w.gpu_only:
            assert r["status"] == "n/a", r
        elif all(has_attr_path(pf, q) for q in w.requires):
            assert r["status"] == "ok", r
            assert r["ours_ms"] > 0 and r["rate"] > 0, r
        else:
            assert r["status"] == "n/a" and r["ours_ms"] is None, r
            assert r["reason"].startswith("not implemented"), r
    assert ALWAYS_IMPLEMENTED <= {n for n, r in results.items() if r["status"] == "ok"}
    assert doc["ceilings"]["copy"]["value"] > 0
    assert doc["ceilings"]["gemm"]["float32"]["value"] > 0
