#!/usr/bin/env bash
# All tests: set up and build, then the C++ tests (ctest) and the Python tests
# (pytest) on every available device (PYFLAME_TEST_DEVICES=cpu,rocm selects).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
echo "== C++ tests"
ctest --test-dir build/py --output-on-failure -j "$(nproc)"
echo "== Python tests"
cd "$ROOT" && "$VPY" -m pytest tests/python -q "$@"
