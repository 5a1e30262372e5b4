#!/usr/bin/env bash
# Builds and runs ew_variants.hip: elementwise and sum kernel variants on the benchmark's sizes.
# Needs nvcc (CUDA_HOME, else /usr/local/cuda, else PATH) and one NVIDIA GPU; about 30 s.
# The source includes the project's headers: the repository root is found above this folder.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$here
while [[ ! -f $repo/src/backend/rocm/gpu/runtime.h ]]; do
  [[ $repo == / ]] && { echo "run.sh: no src/backend/rocm/gpu/runtime.h above $here" >&2; exit 1; }
  repo=$(dirname "$repo")
done
nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
[[ -x $nvcc ]] || nvcc=$(command -v nvcc)
arch=${ARCH:-sm_90}
bin=${TMPDIR:-/tmp}/ew_variants.$$
trap 'rm -f "$bin"' EXIT
"$nvcc" -x cu -std=c++20 -O3 -arch="$arch" --expt-relaxed-constexpr --extended-lambda -DPYFLAME_GPU_CUDA \
  -I"$repo/src" -I"$repo/include" ${PTXAS_VERBOSE:+-Xptxas -v} "$here/ew_variants.hip" -o "$bin"
[[ ${BUILD_ONLY:-0} == 1 ]] && { echo "built $bin"; exit 0; }
"$bin"
