#!/usr/bin/env bash
# GPU check, for a machine with a GPU: builds PyFlame with the GPU backend,
# runs the C++ and Python tests on cpu and rocm (fresh device buffers
# poisoned), compute-sanitizer memcheck and racecheck over the C++ GPU tests,
# the demo and the benchmarks, and prints a summary table last.
#   PYFLAME_GPU=CUDA|ROCM (default CUDA)   STEPS="build cpp py ..." to choose
#   PY_TESTS="tests/python/test_x.py ..." narrows the Python step
#   STEPS="build memcheck-all": the whole Python suite under memcheck (tools/gpu_memcheck.py)
# Logs go to $OUT (if set) or build/gpu-logs. Needs no network: Python
# packages must be installed; OpenBLAS/SLEEF/GoogleTest may come unpacked in .deps/.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
LOG=${OUT:-$ROOT/build/gpu-logs}
mkdir -p "$LOG"
PY=${PYTHON:-python3}
STEPS=${STEPS:-"build cpp py memcheck racecheck pysan demo train bench"}
export PYTHONUNBUFFERED=1

# The system compiler: a toolchain that links libstdc++ statically into the
# extension module breaks iostreams there (GCC 13 initializes them in the
# shared libstdc++).
if [ -x /usr/bin/g++ ]; then export CXX=/usr/bin/g++ CC=/usr/bin/gcc CUDAHOSTCXX=/usr/bin/g++; fi

# Libraries unpacked from Debian packages (when the system lacks them).
if [ -d .deps ] && ! { pkg-config --exists openblas && pkg-config --exists sleef; } 2>/dev/null; then
  D=$ROOT/.deps/usr/lib/x86_64-linux-gnu
  export CMAKE_PREFIX_PATH=$ROOT/.deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export LD_LIBRARY_PATH=$D/openblas-pthread:$D${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

declare -a ROWS
run_step() {  # name, command...
  local name=$1; shift
  echo "== $name: $*"
  local t0=$SECONDS
  "$@" >"$LOG/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$LOG/$name.log"
  local what
  what=$(grep -E "passed|failed|PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|error" "$LOG/$name.log" | tail -n 2 | tr '\n' ' ' | cut -c1-110)
  ROWS+=("$(printf '%-10s %-5s %5ss  %s' "$name" "$([ $rc = 0 ] && echo ok || echo FAIL)" $((SECONDS - t0)) "$what")")
  return $rc
}

has() { [[ " $STEPS " == *" $1 "* ]]; }

GTEST_GPU='Gpu.*'
SAN_FILTER='Gpu.*:-Gpu.OutOfMemory*'
# racecheck looks for shared-memory hazards inside kernels; the threaded
# multi_stream test adds nothing there and runs for minutes under it.
RACE_FILTER='Gpu.*:-Gpu.OutOfMemory*:Gpu.MultiStream*'

has build && run_step build "$PY" -m pip install -v --no-deps --no-build-isolation \
  -C build-dir=build/gpu -C cmake.define.PYFLAME_GPU="${PYFLAME_GPU:-CUDA}" \
  -C cmake.define.PYFLAME_BUILD_TESTS=ON -C cmake.define.PYFLAME_BUILD_BENCHMARKS=ON .
has cpp && run_step cpp env PYFLAME_GPU_POISON=1 build/gpu/pyflame_tests
has py && run_step py env PYFLAME_GPU_POISON=1 PYFLAME_TEST_DEVICES=cpu,rocm \
  "$PY" -m pytest ${PY_TESTS:-tests/python} -q -p no:cacheprovider
has memcheck && run_step memcheck compute-sanitizer --tool memcheck --error-exitcode 3 \
  build/gpu/pyflame_tests --gtest_filter="$SAN_FILTER"
has racecheck && run_step racecheck compute-sanitizer --tool racecheck --error-exitcode 3 \
  build/gpu/pyflame_tests --gtest_filter="$RACE_FILTER"
# The op families' GPU kernels, driven from their Python tests (rocm cases).
PYSAN_TESTS="tests/python/test_norm.py tests/python/test_loss.py tests/python/test_index.py
  tests/python/test_llm.py tests/python/test_softmax.py tests/python/test_conv.py
  tests/python/test_pool.py tests/python/test_batch_norm.py tests/python/test_autograd.py
  tests/python/test_grad_norm_llm.py tests/python/test_grad_conv.py tests/python/test_grad_index.py
  tests/python/test_grad_loss.py"
has pysan && run_step pysan-mem env PYFLAME_TEST_DEVICES=rocm compute-sanitizer --tool memcheck \
  --error-exitcode 3 "$PY" -m pytest $PYSAN_TESTS -q -x -p no:cacheprovider
has pysan && run_step pysan-race env PYFLAME_TEST_DEVICES=rocm compute-sanitizer --tool racecheck \
  --error-exitcode 3 "$PY" -m pytest $PYSAN_TESTS -q -x -p no:cacheprovider
# The whole Python suite's rocm cases under memcheck, in resumable slices (long: not a default
# step; STEPS="build memcheck-all" to run it).
has memcheck-all && run_step memcheck-all "$PY" tools/gpu_memcheck.py --budget "${MEMCHECK_BUDGET:-3600}"
has demo && run_step demo "$PY" examples/demo.py --device rocm
has train && run_step train "$PY" examples/train.py --device rocm
has train && run_step train-amp "$PY" examples/train.py --device rocm --amp
if has bench && [ -f benchmarks/rocm_benchmark.py ]; then
  run_step bench "$PY" benchmarks/rocm_benchmark.py --all --compare torch --json "$LOG/bench.json"
fi

echo
echo "== summary ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
printf '%s\n' "${ROWS[@]}"
