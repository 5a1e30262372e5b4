# Shared by tools/amd/compile_check.sh and tools/nvidia/compile_check.sh (sourced).

# Incremental: an object is reused when it was built by the same command and none of the files
# in its depfile changed since. PYFLAME_CHECK_REBUILD=1 rebuilds everything.
fresh() {  # obj depfile cmdfile cmd
  [[ ${PYFLAME_CHECK_REBUILD:-0} != 1 && -f $1 && -f $2 && -f $3 && $(<"$3") == "$4" ]] || return 1
  local f
  while read -r f; do
    [[ -z $f ]] && continue
    [[ -e $f && ! $f -nt $1 ]] || return 1
  done < <(sed 's/^[^:]*: *//; s/ *\\$//' "$2" | tr -s ' ' '\n')
}
export -f fresh

# Every GPU source under src/backend/rocm into the array `files`, largest first, so a heavy
# file does not start last and stretch the wall time.
gpu_sources() {  # repo
  mapfile -t files < <(find "$1/src/backend/rocm" -type f \( -name '*.hip' -o -name '*.cc' \) \
    -printf '%s %p\n' | sort -k1,1nr -k2 | cut -d' ' -f2-)
  (( ${#files[@]} )) || { echo "no .hip/.cc files under src/backend/rocm" >&2; exit 1; }
}

# The generated sources of representative fused regions (tools/emit_fused_sources.py) appended to
# `files`, so run-time compiled kernels are compile-checked for every target too. Needs the built
# package (.venv from scripts/setup.sh); without it, a note and nothing appended.
fused_sources() {  # repo outdir wave_size
  local py=$1/.venv/bin/python
  if [[ -x $py ]] && "$py" -c "import pyflame" 2>/dev/null; then
    rm -rf "$2"
    "$py" "$1/tools/emit_fused_sources.py" "$2" --wave-size "$3" >/dev/null
    mapfile -t -O "${#files[@]}" files < <(ls "$2"/*.hip)
  else
    echo "note: pyflame is not importable from $1/.venv: generated fused kernels not checked" >&2
  fi
}

# The directory holding nccl.h (collectives.cc): the CUDA toolkit's, the system's, or the
# nvidia-nccl-cu* wheel's in the project's .venv (scripts/setup.sh installs it on CUDA machines).
nccl_include() {  # repo cuda
  local d
  for d in "$2/include" /usr/include; do [[ -f $d/nccl.h ]] && { echo "$d"; return; }; done
  [[ -x $1/.venv/bin/python ]] && "$1/.venv/bin/python" -c \
    "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'include'))" 2>/dev/null
}
