#!/usr/bin/env bash
# ROCm build and link check without a GPU: the full CMake build with PYFLAME_GPU=ROCM (libpyflame,
# the Python extension) against the ROCm 6.4 SDK unpacked by fetch_rocm_sdk.sh, compiled by
# clang-19 (HIP sources as C++ with -x hip), then:
#  - libpyflame is linked with --no-undefined: every symbol it uses is defined by a library it names;
#  - every undefined dynamic symbol of libpyflame and of the extension is defined by a library the
#    binary names (found in the SDK or on the system; Py* symbols by libpython), and both name
#    the HIP runtime, rocBLAS, MIOpen and hipSOLVER;
#  - the C++ package installs, and examples/cpp (the GPU examples included) build and link
#    against it with find_package(PyFlame).
# Nothing is run: there is no AMD GPU here, and Debian sid's ROCm libraries need a newer glibc
# than this system's (so the links below ignore what those libraries need themselves).
#
# Env: PYFLAME_AMD_SDK          SDK dir (default <repo>/build/amd-sdk; fetched if missing)
#      PYFLAME_ROCM_BUILD       build dir (default <repo>/build/rocm)
#      PYFLAME_AMD_LINK_ARCHS   offload archs (default gfx942; compile_check.sh covers the others)
#      JOBS                     parallel build jobs (default 2)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
sdk=${PYFLAME_AMD_SDK:-$repo/build/amd-sdk}
build=${PYFLAME_ROCM_BUILD:-$repo/build/rocm}
prefix=$build-prefix
examples=$build-examples
archs=${PYFLAME_AMD_LINK_ARCHS:-gfx942}
jobs=${JOBS:-2}
llvm=/usr/lib/llvm-19/bin
libdir=$sdk/usr/lib/x86_64-linux-gnu
VPY=$repo/.venv/bin/python
t0=$SECONDS

[[ -f $sdk/.fetched && -e $libdir/libamdhip64.so ]] || "$repo/tools/amd/fetch_rocm_sdk.sh"
[[ -x $VPY ]] || { echo "no .venv: run scripts/setup.sh first" >&2; exit 1; }

# The ROCm libraries' own dependencies are sid's (newer glibc): the linker is pointed at them
# (-rpath-link) but does not hold their needs against this system (executables only).
link_flags="-Wl,-rpath-link,$libdir"
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$llvm/clang++" -DPYFLAME_GPU=ROCM -DROCM_PATH="$sdk/usr" \
  -DPYFLAME_HIP_ARCHITECTURES="${archs// /;}" -DPYFLAME_BUILD_SHARED=ON -DPYFLAME_BUILD_PYTHON=ON \
  -DPYFLAME_PYTHON_STUBS=OFF -DPython_EXECUTABLE="$VPY" \
  -DCMAKE_SHARED_LINKER_FLAGS="$link_flags" -DCMAKE_MODULE_LINKER_FLAGS="$link_flags" >/dev/null
cmake --build "$build" --target pyflame _core -j "$jobs"
echo "[rocm] built libpyflame and the extension for $archs ($((SECONDS - t0)) s)"

fail() { echo "[rocm] FAIL: $*" >&2; exit 1; }
pylib=$("$VPY" -c 'import sysconfig, os; print(os.path.join(sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")))')
find_lib() {  # soname -> path in the SDK or on the system
  local n=$1 p
  for p in "$libdir/$n" "$llvm/../lib/$n"; do [[ -e $p ]] && { echo "$p"; return; }; done
  p=$(/sbin/ldconfig -p | awk -v n="$n" '$1 == n && /x86-64/ {print $NF; exit}')
  [[ -n $p ]] && echo "$p"
}
check_binary() {  # so [extra defining library]
  local so=$1 extra=${2:-} needed n path missing
  mapfile -t needed < <(readelf -d "$so" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p')
  for n in libamdhip64.so.6 librocblas.so.4 libMIOpen.so.1 libhipsolver.so.0; do
    printf '%s\n' "${needed[@]}" | grep -qx "$n" || fail "$(basename "$so") does not link $n"
  done
  local defined=$build/defined.txt
  : > "$defined"
  for n in "${needed[@]}" ${extra:+"$extra"}; do
    path=$([[ $n == /* ]] && echo "$n" || find_lib "$n")
    [[ -n $path ]] || fail "$(basename "$so") needs $n, which is nowhere"
    nm -D --defined-only "$path" | awk '{print $NF}' | sed 's/@.*//' >> "$defined"
  done
  missing=$(nm -D --undefined-only "$so" | awk '$1 == "U" {print $2}' | sed 's/@.*//' | sort -u |
            comm -23 - <(sort -u "$defined"))
  [[ -z $missing ]] || fail "$(basename "$so"): undefined symbols no named library defines:
$(head -20 <<<"$missing")"
  echo "[rocm] $(basename "$so"): $(nm -D --undefined-only "$so" | grep -c ' U ') undefined symbols, all defined by the ${#needed[@]} libraries it names (${needed[*]})"
}
check_binary "$(readlink -f "$build/libpyflame.so")"
check_binary "$(ls "$build"/_core.*.so)" "$pylib"

rm -rf "$prefix" "$examples"
cmake --install "$build" --component cpp --prefix "$prefix" >/dev/null
[[ -f $prefix/include/pyflame/backend/rocm/api.h && -f $prefix/include/pyflame/detail/backend/rocm/gpu/runtime.h ]] ||
  fail "the GPU layer's headers were not installed"
ROCM_PATH=$sdk/usr cmake -S "$repo/examples/cpp" -B "$examples" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$llvm/clang++" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_EXE_LINKER_FLAGS="$link_flags -Wl,--allow-shlib-undefined" >/dev/null
cmake --build "$examples" -j "$jobs"
echo "[rocm] examples built against the installed ROCm package: $(cd "$examples" && ls -1 tensor_ops small_net blas_gemm memory_manager | tr '\n' ' ')"
echo "[rocm] OK ($((SECONDS - t0)) s)"
