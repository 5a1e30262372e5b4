#!/usr/bin/env bash
# The installable C++ package (CPU build by default): builds libpyflame, installs it with `cmake
# --install --component cpp` into a prefix, checks what was installed (library, headers, the GPU
# layer only in a GPU build, CMake package, only pyflame:: symbols exported), then builds
# examples/cpp against the prefix with find_package(PyFlame) and runs them (the GPU examples too in
# a GPU build, e.g. PYFLAME_PKG_GPU=CUDA PYFLAME_PKG_BUILD=build/pkg-cuda on the GPU machine).
#
# Env: PYFLAME_PKG_GPU     GPU backend of the build: OFF (default), CUDA or ROCM
#      PYFLAME_PKG_BUILD   CMake build dir, shared with tools/wheel_check.sh (default build/pkg)
#      PYFLAME_PKG_PREFIX  install prefix (default build/pkg-prefix)
#      JOBS                parallel build jobs (default 2)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PYFLAME_PKG_BUILD:-$repo/build/pkg}
prefix=${PYFLAME_PKG_PREFIX:-$repo/build/pkg-prefix}
examples=$repo/build/pkg-examples
jobs=${JOBS:-2}
gpu=${PYFLAME_PKG_GPU:-OFF}
t0=$SECONDS

gen=()
if [[ ! -f $build/CMakeCache.txt ]] && command -v ninja >/dev/null; then gen=(-G Ninja); fi
cmake -S "$repo" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DPYFLAME_GPU="$gpu" \
  -DPYFLAME_BUILD_SHARED=ON >/dev/null
cmake --build "$build" --target pyflame -j "$jobs"
rm -rf "$prefix"
cmake --install "$build" --component cpp --prefix "$prefix" >/dev/null
echo "[cpp] built and installed libpyflame into $prefix ($((SECONDS - t0)) s)"

fail() { echo "[cpp] $*" >&2; exit 1; }
lib=$(ls "$prefix"/lib*/libpyflame.so)
[[ -f $(readlink -f "$lib") ]] || fail "libpyflame.so missing"
for f in pyflame/pyflame.h pyflame/tensor.h pyflame/ops.h pyflame/backend/rocm.h; do
  [[ -f $prefix/include/$f ]] || fail "header $f not installed"
done
run=(tensor_ops small_net)
if [[ $gpu == OFF ]]; then
  [[ ! -e $prefix/include/pyflame/backend/rocm ]] || fail "the GPU layer's headers were installed in a CPU build"
else
  [[ -f $prefix/include/pyflame/backend/rocm/api.h ]] || fail "the GPU layer's headers were not installed"
  run+=(blas_gemm memory_manager)
fi
ls "$prefix"/lib*/cmake/PyFlame/PyFlameConfig.cmake "$prefix"/lib*/cmake/PyFlame/PyFlameConfigVersion.cmake \
  "$prefix"/lib*/cmake/PyFlame/PyFlameTargets.cmake >/dev/null || fail "CMake package files missing"
# Exported: the pyflame:: API (with its vtables and type information) only.
others=$(nm -DC --defined-only "$lib" | awk '$2 ~ /[TWVDBRiu]/' | cut -d' ' -f3- |
         grep -vE '^(typeinfo for |typeinfo name for |vtable for |VTT for |guard variable for |non-virtual thunk to |virtual thunk to )?pyflame::' |
         grep -vE '^[^ ]+ pyflame::' | grep -vE '^(_init|_fini|PYFLAME_[0-9.]*)$' || true)
[[ -z $others ]] || fail "libpyflame exports symbols outside pyflame:: : $(head -5 <<<"$others")"
echo "[cpp] libpyflame exports $(nm -D --defined-only "$lib" | wc -l) symbols, all pyflame::"

rm -rf "$examples"
cmake -S "$repo/examples/cpp" -B "$examples" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$examples" -j "$jobs"
for e in "${run[@]}"; do
  echo "[cpp] running $e"
  "$examples/$e"
done
echo "[cpp] OK ($((SECONDS - t0)) s)"
