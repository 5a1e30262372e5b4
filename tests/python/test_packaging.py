"""The installed package: type stubs of the extension module, and the
environment variables of the ROCm guide that PyFlame itself handles."""
import ast
import os
import pathlib
import subprocess
import sys

import pytest

import pyflame as pf
from pyflame import _core

PKG = pathlib.Path(pf.__file__).parent


def _stub_names():
    tree = ast.parse((PKG / "_core.pyi").read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_stubs_are_installed_beside_the_module():
    assert (PKG / "_core.pyi").is_file()
    assert (PKG / "py.typed").is_file()


def test_stubs_cover_the_public_api_of_the_module():
    public = {n for n in dir(_core) if not n.startswith("_")}
    missing = public - _stub_names()
    assert not missing, f"in _core but not in _core.pyi: {sorted(missing)}"
    assert {"Tensor", "Dtype", "matmul", "conv2d"} <= public


def test_stub_signatures_name_the_parameters():
    tree = ast.parse((PKG / "_core.pyi").read_text())
    fns = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert [a.arg for a in fns["matmul"].args.args] == ["a", "b"]
    assert fns["matmul"].returns is not None and ast.unparse(fns["matmul"].returns) == "Tensor"


def _device_count(env):
    code = "import pyflame as pf; print(pf.rocm_device_count())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


@pytest.mark.skipif(not pf.rocm_is_available(), reason="needs a GPU")
def test_hip_visible_devices_selects_gpus():
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")}
    n = pf.rocm_device_count()
    env["HIP_VISIBLE_DEVICES"] = "0"
    assert _device_count(env) == 1
    env["HIP_VISIBLE_DEVICES"] = str(n)  # no such device: none visible
    assert _device_count(env) == 0
