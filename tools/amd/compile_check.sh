#!/usr/bin/env bash
# AMD compile check without a GPU: every src/backend/rocm/**/*.hip and *.cc, and the generated
# source of representative fused regions (tools/emit_fused_sources.py), is compiled as HIP
# with clang-19 against the ROCm 6.4 headers fetched by fetch_rocm_sdk.sh, for each offload arch,
# into real objects; each object's embedded code object is then unbundled and checked per arch.
#
# Env: PYFLAME_AMD_SDK    SDK dir (default <repo>/build/amd-sdk; fetched if missing)
#      PYFLAME_AMD_ARCHS  offload archs (default "gfx90a gfx942 gfx1030 gfx1100")
#      PYFLAME_AMD_OUT    object dir (default <repo>/build/amd-check)
#      JOBS               parallel compiles (default nproc)
#      PYFLAME_CHECK_REBUILD=1  ignore objects from earlier runs
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export sdk=${PYFLAME_AMD_SDK:-$repo/build/amd-sdk}
export archs=${PYFLAME_AMD_ARCHS:-gfx90a gfx942 gfx1030 gfx1100}
export out=${PYFLAME_AMD_OUT:-$repo/build/amd-check}
export repo
llvm=/usr/lib/llvm-19/bin
export PATH=$llvm:$PATH  # clang finds clang-offload-bundler and ld.lld next to itself or on PATH

# fresh (incremental objects) and gpu_sources (the file list).
source "$repo/tools/lib/compile_check.sh"

# One file: compile once for all archs (a single host pass), then verify each arch's code object.
compile_one() {
  local src=$1 rel=${1#$repo/} t0=$SECONDS
  local obj=$out/obj/${rel%.*}.o log=$out/log/${rel%.*}.log tmp=$out/tmp/${rel%.*}
  mkdir -p "$(dirname "$obj")" "$(dirname "$log")"
  local bc; bc=$(ls -d "$sdk"/usr/lib/llvm-*/lib/clang/*/amdgcn/bitcode | head -1)
  local arch_flags=(); for a in $archs; do arch_flags+=(--offload-arch="$a"); done
  # --rocm-path: without it clang-19 refuses (no HIP runtime found) or picks a system /usr HIP.
  local cmd=(clang++ -x hip -std=c++20 -O2 -Wall "${arch_flags[@]}"
    --rocm-path="$sdk/usr" --rocm-device-lib-path="$bc"
    -I"$sdk/usr/include" -I"$repo/include" -I"$repo/src" -D__HIP_PLATFORM_AMD__
    -MD -MF "$obj.d" -c "$src" -o "$obj")
  if fresh "$obj" "$obj.d" "$obj.cmd" "${cmd[*]}"; then
    t0=cached
  elif rm -f "$obj" "$obj.cmd" && "${cmd[@]}" >"$log" 2>&1; then
    echo "${cmd[*]}" > "$obj.cmd"
  else
    for a in $archs; do  # clang ends each failing pass with "... generated when compiling for X."
      if grep -q "compiling for $a\." "$log"; then echo "FAIL $a $rel"
      elif grep -q "compiling for host\." "$log"; then echo "FAIL $a $rel (host pass)"
      else echo "FAIL $a $rel (not checked: another pass failed)"; fi
    done
    sed 's/^/    | /' "$log" | head -40
    return 1
  fi
  local warns; warns=$(grep -c "warning:" "$log" || true)
  # Device code check: .hip_fatbin -> clang offload bundle -> one AMDGPU ELF per arch.
  mkdir -p "$tmp"
  objcopy -O binary --only-section=.hip_fatbin "$obj" "$tmp/fatbin"
  local expect_kernels=0; grep -qE '__global__|__launch_bounds__' "$src" && expect_kernels=1
  if (( ! expect_kernels )) && [[ ! -s $tmp/fatbin ]]; then
    # Host-only file: clang ran every device pass (errors would have failed the compile) but
    # embeds no code object when there are no kernels.
    for a in $archs; do echo "ok   $a $rel (host code, no kernels, $warns warnings, $([[ $t0 == cached ]] && echo cached || echo "$((SECONDS - t0)) s"))"; done
    rm -rf "$tmp"; return 0
  fi
  local rc=0
  for a in $archs; do
    local co=$tmp/$a.co kernels
    if [[ ! -s $tmp/fatbin ]] ||
       ! clang-offload-bundler --unbundle --type=o --input="$tmp/fatbin" \
           --targets="hipv4-amdgcn-amd-amdhsa--$a" --output="$co" 2>>"$log" ||
       [[ ! -s $co ]] || ! grep -aq "amdgcn-amd-amdhsa--$a" "$co"; then
      echo "FAIL $a $rel (no $a code object in the object)"; rc=1; continue
    fi
    kernels=$(readelf -W --dyn-syms "$co" | grep -c '\.kd$' || true)
    if (( expect_kernels && kernels == 0 )); then
      echo "FAIL $a $rel (defines kernels but the $a code object has none)"; rc=1; continue
    fi
    echo "ok   $a $rel ($kernels kernels, $(stat -c %s "$co") B code object, $warns warnings, $([[ $t0 == cached ]] && echo cached || echo "$((SECONDS - t0)) s"))"
  done
  rm -rf "$tmp"
  return $rc
}
export -f compile_one

if [[ ${1:-} == --one ]]; then compile_one "$2"; exit; fi

[[ -f $sdk/.fetched ]] || "$repo/tools/amd/fetch_rocm_sdk.sh"
command -v "$llvm/clang++" >/dev/null || { echo "clang-19 missing: run tools/amd/fetch_rocm_sdk.sh" >&2; exit 1; }

gpu_sources "$repo"
fused_sources "$repo" "$out/fused-src" 64
narch=$(wc -w <<<"$archs")
mkdir -p "$out"
echo "AMD compile check: ${#files[@]} files x $narch archs ($archs), clang $("$llvm/clang++" -dumpversion), $(cat "$sdk/usr/share/hip/version" 2>/dev/null | grep -m1 HIP_VERSION_MAJOR || true)"
start=$SECONDS
status=0
printf '%s\0' "${files[@]}" | xargs -0 -n1 -P "${JOBS:-$(nproc)}" "$0" --one || status=1
if (( status )); then
  echo "AMD compile check FAILED ($((SECONDS - start)) s); logs in $out/log"; exit 1
fi
echo "AMD compile check: ${#files[@]} files x $narch archs OK ($((SECONDS - start)) s)"
