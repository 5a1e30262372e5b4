#!/usr/bin/env bash
# Installs what is missing (Debian packages, a Python virtual environment in
# .venv with the Python packages) and builds PyFlame into it. Idempotent:
# a second run only rebuilds what changed. Sourced by run.sh and test.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

APT_PACKAGES=(build-essential cmake ninja-build pkg-config libopenblas-dev libsleef-dev libgtest-dev
              libbenchmark-dev python3-venv python3-dev python3-numpy python3-pytest
              libopenmpi-dev openmpi-bin)
# PyTorch (CPU) is the tests' oracle and the benchmarks' comparison; matplotlib
# draws benchmark plots. Both optional: tests that need PyTorch skip without it.
OPTIONAL_PACKAGES=(python3-torch python3-matplotlib)
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
missing=()
for p in "${APT_PACKAGES[@]}" "${OPTIONAL_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  apt_install() { DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
  apt_install "${APT_PACKAGES[@]}"
  apt_install "${OPTIONAL_PACKAGES[@]}" || echo "note: ${OPTIONAL_PACKAGES[*]} not installed (optional)"
fi

# The system Python, so Debian's NumPy and PyTorch are visible in the venv.
PY=${PYTHON:-/usr/bin/python3}
if [ ! -x .venv/bin/python ]; then
  echo "== creating virtual environment .venv ($PY)"
  "$PY" -m venv --system-site-packages .venv
fi
VPY=$ROOT/.venv/bin/python
# Build and test tools from PyPI (NumPy and pytest already come from Debian;
# safetensors for pf.save / pf.load and checkpoints, tokenizers for
# pyflame.llm, hypothesis drives the property-based tests). A current pip:
# Debian's lacks the -C config-settings flag used below.
"$VPY" -m pip install -q --disable-pip-version-check --upgrade pip
"$VPY" -m pip install -q --disable-pip-version-check numpy nanobind scikit-build-core pytest \
  safetensors tokenizers hypothesis

# NCCL for pyflame.distributed on NVIDIA: the wheel matching the CUDA toolkit's major
# version (its header builds the NCCL backend, its library is opened at run time).
NVCC=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
if [ "${PYFLAME_GPU:-AUTO}" != OFF ] && [ "${PYFLAME_GPU:-AUTO}" != ROCM ] && [ -x "$NVCC" ]; then
  cuda_major=$("$NVCC" --version | grep -o 'release [0-9]*' | grep -o '[0-9]*$')
  "$VPY" -m pip install -q --disable-pip-version-check "nvidia-nccl-cu${cuda_major}" ||
    echo "note: nvidia-nccl-cu${cuda_major} not installed: no NCCL backend in this build"
fi

echo "== building PyFlame (GPU backend: ${PYFLAME_GPU:-AUTO})"
"$VPY" -m pip install -q --disable-pip-version-check --no-build-isolation \
  -C build-dir=build/py -C cmake.define.PYFLAME_BUILD_TESTS=ON \
  -C cmake.define.PYFLAME_GPU="${PYFLAME_GPU:-AUTO}" .
