#!/usr/bin/env bash
# NVIDIA compile check (no GPU needed): every src/backend/rocm/**/*.hip and *.cc, and the generated
# source of representative fused regions (tools/emit_fused_sources.py), is compiled as CUDA
# by nvcc through gpu/runtime.h's alias layer (PYFLAME_GPU_CUDA), into objects with device code.
# Only a compile: nothing is linked or run.
#
# Env: CUDA_HOME            CUDA toolkit (default /usr/local/cuda)
#      PYFLAME_CUDA_ARCHS   SM targets (default "90")
#      PYFLAME_NVIDIA_OUT   object dir (default <repo>/build/nvidia-check)
#      NVCC_CCBIN           host compiler for nvcc (default: nvcc's own choice, g++); e.g. clang++-19
#      JOBS                 parallel compiles (default nproc)
#      PYFLAME_CHECK_REBUILD=1  ignore objects from earlier runs
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export repo
export cuda=${CUDA_HOME:-/usr/local/cuda}
export sms=${PYFLAME_CUDA_ARCHS:-90}
export out=${PYFLAME_NVIDIA_OUT:-$repo/build/nvidia-check}
export ccbin=${NVCC_CCBIN:-}

# fresh (incremental objects) and gpu_sources (the file list).
source "$repo/tools/lib/compile_check.sh"
export nccl_inc=${nccl_inc-$(nccl_include "$repo" "$cuda")}

compile_one() {
  local src=$1 rel=${1#$repo/} t0=$SECONDS
  local obj=$out/obj/${rel%.*}.o log=$out/log/${rel%.*}.log
  mkdir -p "$(dirname "$obj")" "$(dirname "$log")"
  local flags=(); for sm in $sms; do flags+=(-gencode "arch=compute_$sm,code=sm_$sm"); done
  [[ -z $ccbin ]] || flags+=(-ccbin "$ccbin")
  # The two --ext flags give nvcc clang-HIP's rules: constexpr functions (std::numeric_limits)
  # and lambdas usable in device code. The NVIDIA build must pass them too.
  local cmd=("$cuda/bin/nvcc" -x cu -std=c++20 -O2 "${flags[@]}" --expt-relaxed-constexpr
    --extended-lambda -DPYFLAME_GPU_CUDA -I"$repo/include" -I"$repo/src" ${nccl_inc:+-I"$nccl_inc"}
    -MD -MF "$obj.d" -c "$src" -o "$obj")
  if fresh "$obj" "$obj.d" "$obj.cmd" "${cmd[*]}"; then
    t0=cached
  elif rm -f "$obj" "$obj.cmd" && "${cmd[@]}" >"$log" 2>&1; then
    echo "${cmd[*]}" > "$obj.cmd"
  else
    local hint=""
    grep -q "internal compiler error" "$log" && hint=" (host compiler crashed; try NVCC_CCBIN=clang++-19)"
    echo "FAIL sm_${sms// /,sm_} $rel$hint"; sed 's/^/    | /' "$log" | head -40; return 1
  fi
  local warns; warns=$(grep -c "warning" "$log" || true)
  if ! grep -qE '__global__|__launch_bounds__' "$src"; then
    echo "ok   sm_${sms// /,sm_} $rel (host code, $warns warnings, $([[ $t0 == cached ]] && echo cached || echo "$((SECONDS - t0)) s"))"; return 0
  fi
  # Device code check: walk the .nv_fatbin entries (16-byte header; per entry: kind u16 at +0,
  # header size u32 at +4, payload size u64 at +8, SM u32 at +28) and require a non-empty cubin
  # (kind 2) for every requested SM.
  local fb=$out/log/${rel%.*}.fatbin
  objcopy -O binary --only-section=.nv_fatbin "$obj" "$fb"
  rd() { od -An -t "u$2" -j "$1" -N "$2" "$fb" | tr -d ' '; }
  local have="" off end size
  if [[ -s $fb ]]; then
    off=$(rd 6 2); end=$((off + $(rd 8 8)))
    while (( off < end )); do
      size=$(rd $((off + 8)) 8)
      [[ $(rd "$off" 2) == 2 ]] && (( size > 0 )) && have+=" $(rd $((off + 28)) 4):$size"
      off=$((off + $(rd $((off + 4)) 4) + size))
    done
  fi
  local sm rc=0 entry
  for sm in $sms; do
    entry=$(tr ' ' '\n' <<<"$have" | grep "^$sm:" | head -1 || true)
    if [[ -z $entry ]]; then
      echo "FAIL sm_$sm $rel (no sm_$sm device code in the object)"; rc=1
    else
      echo "ok   sm_$sm $rel (sm_$sm cubin ${entry#*:} B, $warns warnings, $([[ $t0 == cached ]] && echo cached || echo "$((SECONDS - t0)) s"))"
    fi
  done
  rm -f "$fb"
  return $rc
}
export -f compile_one

if [[ ${1:-} == --one ]]; then compile_one "$2"; exit; fi

[[ -x $cuda/bin/nvcc ]] || { echo "nvcc not found under $cuda (set CUDA_HOME)" >&2; exit 1; }
gpu_sources "$repo"
fused_sources "$repo" "$out/fused-src" 32
mkdir -p "$out"
echo "NVIDIA compile check: ${#files[@]} files, sm_${sms// /,sm_}, nvcc $("$cuda/bin/nvcc" --version | grep -o 'release [0-9.]*'), host ${ccbin:-default}"
start=$SECONDS
if ! printf '%s\0' "${files[@]}" | xargs -0 -n1 -P "${JOBS:-$(nproc)}" "$0" --one; then
  echo "NVIDIA compile check FAILED ($((SECONDS - start)) s); logs in $out/log"; exit 1
fi
echo "NVIDIA compile check: ${#files[@]} files x $(wc -w <<<"$sms") archs OK ($((SECONDS - start)) s)"
