#!/usr/bin/env bash
# Installs what is missing (Debian packages, a Python virtual environment in
# .venv with the Python packages) and builds PyFlame into it. Idempotent:
# a second run only rebuilds what changed. Sourced by run.sh and test.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

APT_PACKAGES=(build-essential cmake ninja-build pkg-config libopenblas-dev libgtest-dev
              libbenchmark-dev python3-venv python3-dev)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "== creating virtual environment .venv"
  "$PY" -m venv .venv
fi
VPY=$ROOT/.venv/bin/python
# Packages the build and the tests need; torch (CPU) is an optional oracle.
"$VPY" -m pip install -q --disable-pip-version-check numpy nanobind scikit-build-core pytest

echo "== building PyFlame (GPU backend: ${PYFLAME_GPU:-AUTO})"
"$VPY" -m pip install -q --disable-pip-version-check --no-build-isolation \
  -C build-dir=build/py -C cmake.define.PYFLAME_BUILD_TESTS=ON \
  -C cmake.define.PYFLAME_GPU="${PYFLAME_GPU:-AUTO}" .
