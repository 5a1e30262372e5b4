#!/usr/bin/env bash
# `pip wheel .` check (CPU build): builds the wheel with the repository's .venv (scripts/setup.sh
# makes it), installs it into a fresh virtual environment with nothing else in it (NumPy comes
# from PyPI as the wheel's dependency), imports pyflame there and compares a few ops with NumPy;
# checks that the wheel carries the type stubs (_core.pyi, py.typed).
#
# Env: PYFLAME_PKG_BUILD  CMake build dir, shared with tools/cpp_package_check.sh (default build/pkg)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PYFLAME_PKG_BUILD:-$repo/build/pkg}
dist=$repo/build/dist
venv=$repo/build/wheel-venv
VPY=$repo/.venv/bin/python
[[ -x $VPY ]] || { echo "no .venv: run scripts/setup.sh first" >&2; exit 1; }

t0=$SECONDS
rm -rf "$dist"
cd "$repo"
"$VPY" -m pip wheel . -q --no-build-isolation --no-deps --disable-pip-version-check -w "$dist" \
  -C build-dir="$build" -C cmake.define.PYFLAME_GPU=OFF
whl=$(ls "$dist"/pyflame-*.whl)
echo "[wheel] built $(basename "$whl") ($((SECONDS - t0)) s)"
files=$("$VPY" -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$whl")
for f in pyflame/_core.pyi pyflame/py.typed pyflame/__init__.py; do
  grep -qx "$f" <<<"$files" || { echo "[wheel] $f missing from the wheel" >&2; exit 1; }
done
grep -q "^pyflame/_core\..*\.so$" <<<"$files" || { echo "[wheel] the extension is missing" >&2; exit 1; }
if grep -qE "libpyflame|include/|cmake/" <<<"$files"; then
  echo "[wheel] the wheel carries C++ package files" >&2; exit 1
fi

rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"   # no system site packages: only what the wheel brings
"$venv/bin/python" -m pip install -q --disable-pip-version-check "$whl"
cd "$venv"   # not the repository: the import must come from the installed wheel
"$venv/bin/python" - <<'PY'
import pathlib
import numpy as np
import pyflame as pf

assert pathlib.Path(pf.__file__).parent.joinpath("_core.pyi").is_file()
rng = np.random.default_rng()
a = rng.standard_normal((5, 7)).astype(np.float32)
b = rng.standard_normal((7, 3)).astype(np.float32)
y = pf.relu(pf.tensor(a) @ pf.tensor(b) + 1.0).numpy()
np.testing.assert_allclose(y, np.maximum(a @ b + 1.0, 0), rtol=1e-5, atol=1e-5)
np.testing.assert_allclose(pf.tensor(a).sum().item(), a.sum(), rtol=1e-5)
print(f"[wheel] pyflame {pf.__version__} from {pathlib.Path(pf.__file__).parent}: ops match NumPy")
PY
echo "[wheel] OK ($((SECONDS - t0)) s)"
