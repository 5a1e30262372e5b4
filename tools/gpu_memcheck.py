"""compute-sanitizer memcheck over every 'rocm' case of the Python suite, in resumable slices.

    python tools/gpu_memcheck.py [--budget SECONDS] [--workers N] [--state DIR] [PATHS...]

The whole suite under memcheck takes longer than one sitting may allow (about 20 minutes with 14
workers on a 16-core H100 host), so each run collects the cases once (STATE/all.txt), runs those
not yet finished under `compute-sanitizer --tool memcheck --target-processes all` until its budget
is spent, and records each case's outcome (STATE/done.txt) and every sanitizer report line
(STATE/reports.txt). A later run goes on where the last one stopped; `--fresh` starts over.

The summary separates memory access errors (invalid, misaligned or out-of-range accesses, bad
frees, which fail the run) from API errors (a failed cudaMalloc in a test that exhausts memory on
purpose is one). Exit status: 0 when every case finished without a memory access error, 3 when
one was reported, 1 when cases remain.

The same file is the pytest plugin each slice loads (`-p gpu_memcheck`): it deselects the cases
STATE/done.txt already lists.
"""
import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter

STATE_ENV = "PYFLAME_MEMCHECK_STATE"
# xdist's verbose line for a finished case; a sanitizer report may follow on the same line.
RESULT = re.compile(r"\[gw\d+\] \[\s*\d+%\] (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS) (tests/\S.*)$", re.M)
MEMORY_ERROR = re.compile(r"Invalid __\w+__|[Mm]isaligned|[Oo]ut-of-range|Malloc/Free|Address .* is out of bounds")


def read_done(path):
    done = {}
    if os.path.exists(path):
        for line in open(path).read().splitlines():
            outcome, _, case = line.partition(" ")
            done[case] = outcome
    return done


def pytest_collection_modifyitems(config, items):  # the plugin side
    state = os.environ.get(STATE_ENV)
    if not state:
        return
    done = read_done(os.path.join(state, "done.txt"))
    finished = [i for i in items if i.nodeid in done]
    if finished:
        config.hook.pytest_deselected(items=finished)
        items[:] = [i for i in items if i.nodeid not in done]


def collect(args, env):
    r = subprocess.run([sys.executable, "-m", "pytest", *args.paths, "--collect-only", "-q", "-k", args.key,
                        "-p", "no:cacheprovider"], env=env, capture_output=True, text=True)
    cases = [line.strip() for line in r.stdout.splitlines() if "::" in line]
    if not cases:
        sys.exit(f"gpu_memcheck: no '{args.key}' cases collected:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return cases


def run_slice(args, env, files, seconds, log):
    cmd = shlex.split(args.sanitizer) + [
        sys.executable, "-m", "pytest", *files, "-k", args.key, "-p", "no:cacheprovider", "-p", "gpu_memcheck",
        "-n", str(args.workers), "-v", "--tb=short", "-rf", "-W", "ignore"]
    with open(log, "w") as fh:
        p = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            p.wait(timeout=seconds)
        except subprocess.TimeoutExpired:  # the budget is spent: what finished is recorded below
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    return open(log, errors="replace").read()


def record(text, state):
    with open(os.path.join(state, "done.txt"), "a") as fh:
        for m in RESULT.finditer(text):
            fh.write(f"{m.group(1)} {m.group(2).split('=========')[0].rstrip()}\n")
    with open(os.path.join(state, "reports.txt"), "a") as fh:
        for line in text.splitlines():
            at = line.find("=========")
            line = line[at:] if at >= 0 else ""
            if line and "COMPUTE-SANITIZER" not in line and "ERROR SUMMARY: 0 errors" not in line:
                fh.write(line + "\n")


def summary(cases, state):
    done = read_done(os.path.join(state, "done.txt"))
    finished = [c for c in cases if c in done]
    reports_path = os.path.join(state, "reports.txt")
    reports = open(reports_path).read().splitlines() if os.path.exists(reports_path) else []
    memory = [r for r in reports if MEMORY_ERROR.search(r)]
    api = Counter(r for r in reports if "Program hit" in r)
    print(f"cases: {len(finished)} of {len(cases)} finished; outcomes {dict(Counter(done[c] for c in finished))}")
    print(f"memory access errors: {len(memory)}")
    for r in memory[:20]:
        print("  " + r)
    print(f"API errors: {sum(api.values())}")
    for r, n in api.most_common(10):
        print(f"  {n} x {r}")
    failed = [c for c in finished if done[c] in ("FAILED", "ERROR")]
    if failed:
        print("failed under memcheck (the reasons are in the slices' logs):")
        for c in failed:
            print("  " + c)
    left = [c for c in cases if c not in done]
    if left:
        print(f"not finished: {len(left)}")
        for c in left[:20]:
            print("  " + c)
    return 3 if memory else (1 if left else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", default=["tests/python"])
    ap.add_argument("--budget", type=float, default=3600, help="seconds this run may take (default 3600)")
    ap.add_argument("--workers", type=int, default=max(1, min(14, (os.cpu_count() or 2) - 2)))
    ap.add_argument("--state", default="build/gpu-memcheck", help="where progress is kept")
    ap.add_argument("--fresh", action="store_true", help="forget earlier progress")
    ap.add_argument("--key", default="rocm", help="device of the cases (-k and PYFLAME_TEST_DEVICES)")
    ap.add_argument("--sanitizer", default="compute-sanitizer --tool memcheck --target-processes all --print-limit 50",
                    help="command the slices run under")
    args = ap.parse_args()
    deadline = time.monotonic() + args.budget
    os.makedirs(args.state, exist_ok=True)
    if args.fresh:
        for name in ("all.txt", "done.txt", "reports.txt"):
            if os.path.exists(os.path.join(args.state, name)):
                os.remove(os.path.join(args.state, name))
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYFLAME_TEST_DEVICES=args.key, **{STATE_ENV: os.path.abspath(args.state)},
               PYTHONPATH=os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p))
    all_path = os.path.join(args.state, "all.txt")
    if not os.path.exists(all_path):
        open(all_path, "w").write("\n".join(collect(args, env)) + "\n")
    cases = [c for c in open(all_path).read().splitlines() if c]
    for attempt in range(3):  # a slice that leaves cases behind without running out of time: twice more
        done = read_done(os.path.join(args.state, "done.txt"))
        left = [c for c in cases if c not in done]
        seconds = deadline - time.monotonic()
        if not left or seconds < 60:
            break
        files = sorted({c.split("::")[0] for c in left})
        print(f"slice {attempt + 1}: {len(left)} cases in {len(files)} files, {seconds:.0f} s left", flush=True)
        log = os.path.join(args.state, f"slice-{int(time.time())}.log")
        record(run_slice(args, env, files, seconds, log), args.state)
    return summary(cases, args.state)


if __name__ == "__main__":
    sys.exit(main())
