"""Hostile inputs to the pure-Python layer (assignment values, optimizer
options, model directories, checkpoint paths, integer ranges, slices): a bad
argument raises a PyFlame-style error naming the function ('[fn] ...'),
never a Python internal (ValueError 'could not convert string to float',
'cannot convert float NaN to integer', AttributeError, RecursionError) or a
library's own error type; a value NumPy takes is answered exactly as NumPy
does."""
import json
import os

import numpy as np
import pytest

import pyflame as pf
from conftest import assert_close, make_tensor
from pyflame import nn, optim

_INTERNAL = ("could not convert", "cannot convert float", "has no attribute", "not subscriptable",
             "unsupported operand", "invalid literal", "can't multiply", "std::")


def _raises(exc, fn, call):
    with pytest.raises(exc) as info:
        out = call()
        if isinstance(out, pf.Tensor):
            out.numpy()
    msg = str(info.value)
    assert msg.startswith(f"[{fn}] "), f"{type(info.value).__name__}: {msg!r} does not start with '[{fn}] '"
    assert not any(s in msg for s in _INTERNAL), msg
    return msg


# ------------------------- scalar values written by setitem, fill_, masked_fill, where

_ALL = slice(None)
_WRITES = [  # (write, its name, the positions it writes)
    (lambda x, v: x.__setitem__(0, v), "setitem", 0),
    (lambda x, v: x.__setitem__(_ALL, v), "setitem", _ALL),
    (lambda x, v: x.fill_(v), "fill_", _ALL),
    (lambda x, v: pf.masked_fill(x, x == x, v), "masked_fill", _ALL),
    (lambda x, v: x.masked_fill_(x == x, v), "masked_fill", _ALL),
]


@pytest.mark.parametrize("write, fn, where", _WRITES)
@pytest.mark.parametrize("bad", ["a", None, [1, "b"], object(), 1 + 2j])
def test_written_value_must_be_a_real_number(device, write, fn, where, bad):
    if fn == "setitem" and isinstance(bad, list):
        pytest.skip("a list is an array-like value for setitem")
    # setitem reads a non-number as array data: a ValueError, as NumPy does.
    exc = (TypeError, ValueError) if fn == "setitem" else TypeError
    _raises(exc, fn, lambda: write(pf.ones(3, device=device), bad))


@pytest.mark.parametrize("write, fn, where", _WRITES)
@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 1e20, 2**70, -(2**70), 2**1100])
def test_written_value_the_integer_dtype_cannot_hold_raises(device, write, fn, where, dtype, bad):
    with pytest.raises((ValueError, OverflowError)):  # NumPy rejects them too
        np.zeros(3, dtype=dtype)[0] = bad
    _raises(ValueError, fn, lambda: write(pf.zeros(3, dtype=getattr(pf, dtype), device=device), bad))


@pytest.mark.parametrize("write, fn, where", _WRITES)
@pytest.mark.parametrize("value", [2**62 + 1, -(2**63), 2**63 - 1, 2**53 + 1, 7.9, -7.9, True])
def test_written_int64_values_are_exact(device, write, fn, where, value):
    # Integers beyond float64's 2**53 must not be rounded on the way in;
    # floats truncate toward zero, as NumPy's assignment does.
    x = pf.zeros(3, dtype=pf.int64, device=device)
    out = write(x, value)
    got = out if fn == "masked_fill" and out is not None else x
    expected = np.zeros(3, dtype=np.int64)
    expected[where] = value
    assert_close(got, expected, "int64")


def test_where_with_two_scalars(device):
    c = pf.tensor([True, False], device=device)
    assert_close(pf.where(c, 2**62 + 1, 0), np.array([2**62 + 1, 0]), "int64")
    assert_close(pf.where(c, 1.5, 0), np.array([1.5, 0.0]), "float32")
    _raises(TypeError, "where", lambda: pf.where(c, "a", 0))
    _raises(TypeError, "where", lambda: pf.where(c, 1 + 2j, 0))


# ----------------------------------------------------- optimizer options per group

@pytest.mark.parametrize("cls, options", [
    (optim.SGD, {"lr": "a"}), (optim.SGD, {"lr": -1.0}), (optim.SGD, {"momentum": None}),
    (optim.SGD, {"weight_decay": float("nan")}), (optim.SGD, {"nesterov": True}),
    (optim.Adam, {"lr": "a"}), (optim.Adam, {"betas": 5}), (optim.Adam, {"betas": (1.5, 0.9)}),
    (optim.AdamW, {"lr": [0.1]}), (optim.AdamW, {"eps": -1.0}), (optim.AdamW, {"weight_decay": "x"}),
])
def test_optimizer_group_options_are_checked(device, cls, options):
    fn = f"{cls.__name__}.add_param_group"
    p, q = nn.Parameter(pf.ones(2)), nn.Parameter(pf.ones(2))
    exc = (TypeError, ValueError)
    _raises(exc, fn, lambda: cls([{"params": [p], **options}], lr=0.1))
    opt = cls([p], lr=0.1)
    _raises(exc, fn, lambda: opt.add_param_group({"params": [q], **options}))
    assert len(opt.param_groups) == 1  # the bad group was not added
    sd = opt.state_dict()
    sd["param_groups"][0].update(options)
    _raises(exc, f"{cls.__name__}.load_state_dict", lambda: opt.load_state_dict(sd))
    (p * p).sum().backward()
    opt.step()  # the optimizer still works with its good options
    assert np.all(np.isfinite(p.numpy()))


def test_optimizer_loaded_step_must_be_a_number(device):
    p = nn.Parameter(pf.ones(2))
    opt = optim.Adam([p], lr=0.1)
    sd = {"state": {0: {"step": "b"}}, "param_groups": [{"params": [0], "lr": 0.1}]}
    _raises(TypeError, "load_state_dict", lambda: opt.load_state_dict(sd))


def test_optimizer_structural_errors_name_the_optimizer(device):
    _raises(ValueError, "SGD", lambda: optim.SGD([], lr=0.1))
    _raises(TypeError, "Adam.add_param_group", lambda: optim.Adam([None]))
    opt = optim.SGD([p := nn.Parameter(pf.ones(2))], lr=0.1)
    _raises(ValueError, "SGD.add_param_group", lambda: opt.add_param_group({"params": [p]}))


# ---------------------------------------------------------- broken model directories

_CFG = {"model_type": "llama", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
        "num_hidden_layers": 1, "num_attention_heads": 2, "tie_word_embeddings": True}


def _model_dir(tmp_path, config, files=()):
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    for name, data in files:
        (d / name).write_bytes(data)
    return d


def _weights(d, cfg=_CFG):
    from safetensors.numpy import save_file
    from pyflame.llm.config import ModelConfig
    from pyflame.llm.loader import expected_weights
    shapes = expected_weights(ModelConfig.from_dict(cfg))
    save_file({k: np.ones(s, np.float32) for k, s in shapes.items()}, str(d / "model.safetensors"))


@pytest.mark.parametrize("config", [
    "[]", "5", "{", dict(_CFG, vocab_size="a"), dict(_CFG, hidden_size=[8]), dict(_CFG, num_hidden_layers=-1),
    dict(_CFG, vocab_size=0), dict(_CFG, num_attention_heads=0), dict(_CFG, num_attention_heads=2.5),
    dict(_CFG, rope_scaling=5), dict(_CFG, rope_scaling={"rope_type": "linear", "factor": "x"}),
    dict(_CFG, rope_theta="big"), dict(_CFG, sliding_window="a"), dict(_CFG, num_key_value_heads=True),
])
def test_llm_load_bad_config(tmp_path, config):
    import pyflame.llm
    _raises(ValueError, "llm.load", lambda: pyflame.llm.load(_model_dir(tmp_path, config)))


@pytest.mark.parametrize("files", [
    [("model.safetensors", b"junk")],
    [("model.safetensors", (2**40).to_bytes(8, "little") + b"{}")],
    [("model.safetensors.index.json", b'{"weight_map": 5}')],
    [("model.safetensors.index.json", b'{"weight_map": {"model.norm.weight": 3}}')],
    [("model.safetensors.index.json", b"garbage")],
    [("model.safetensors.index.json", b"[1, 2]")],
])
def test_llm_load_bad_weight_files(tmp_path, files):
    import pyflame.llm
    _raises(ValueError, "llm.load", lambda: pyflame.llm.load(_model_dir(tmp_path, _CFG, files)))


def test_llm_load_bad_tokenizer_and_path(tmp_path):
    import pyflame.llm
    d = _model_dir(tmp_path, _CFG, [("tokenizer.json", b"{")])
    _weights(d)
    _raises(ValueError, "llm.load", lambda: pyflame.llm.load(d))
    os.remove(d / "tokenizer.json")
    model, tok = pyflame.llm.load(d)  # the same directory without it loads
    assert tok is None and model is not None
    for bad in (None, 5, ["x"]):
        _raises(ValueError, "llm.load", lambda: pyflame.llm.load(bad))


# ------------------------------------------------------------ save / load targets

def test_save_to_a_path_that_cannot_be_a_file(tmp_path, device):
    obj = {"a": pf.ones(2, device=device)}
    _raises(FileNotFoundError, "save", lambda: pf.save(obj, str(tmp_path / "missing" / "x.pf")))
    _raises(IsADirectoryError, "save", lambda: pf.save(obj, str(tmp_path)))
    for bad in (None, 5, ["x"]):
        _raises(TypeError, "save", lambda: pf.save(obj, bad))
        _raises(TypeError, "load", lambda: pf.load(bad))
    pf.save(obj, os.fsencode(tmp_path / "b.pf"))  # bytes paths work, as in open()
    assert_close(pf.load(os.fsencode(tmp_path / "b.pf"))["a"], np.ones(2), "float32")


def test_save_of_a_container_inside_itself(tmp_path, device):
    d = {"w": pf.ones(2, device=device)}
    d["self"] = d
    lst = [1]
    lst.append(lst)
    for obj, where in ((d, "self"), (lst, "1"), ({"a": [{"b": lst}]}, "a.0.b.1")):
        msg = _raises(ValueError, "save", lambda: pf.save(obj, str(tmp_path / "x.pf")))
        assert f"'{where}'" in msg
    shared = [1, 2]  # the same list twice is not a cycle
    pf.save({"a": shared, "b": shared}, str(tmp_path / "y.pf"))
    assert pf.load(str(tmp_path / "y.pf")) == {"a": [1, 2], "b": [1, 2]}


# -------------------------------------------------- integer ranges beyond 2**53

@pytest.mark.parametrize("args", [(2**62, 2**62 + 3), (-(2**63), -(2**63) + 2), (2**62 + 5, 2**62, -2),
                                  (0, 2**62, 2**61), (2**62, 0, -(2**60)), (2**63 - 3, 2**63 - 1),
                                  (5, 2**62 + 1, 2**62), (2**53, 2**53 + 4), (-5, 2**62, 2**62)])
def test_arange_of_integers_beyond_float64_is_exact(device, args):
    # Python's range is the exact reference: NumPy counts the elements in
    # float64 (np.arange(-5, 2**62, 2**62) has one element; there are two).
    assert_close(pf.arange(*args), np.array(range(*args), dtype=np.int64), "int64")


def test_arange_beyond_float64_still_checks_its_size(device):
    _raises(ValueError, "arange", lambda: pf.arange(0, 2**62))
    _raises(ValueError, "arange", lambda: pf.arange(2**62, 2**62 + 3, 0))


# ------------------------------------------------------------------- slices

@pytest.mark.parametrize("key, exc", [(slice(None, None, 0), ValueError), ((0, slice(1, 3, 0)), ValueError),
                                      (slice(1.5, None), TypeError), (slice("a", 2), TypeError)])
def test_bad_slices_name_getitem(device, key, exc):
    a = np.arange(12).reshape(3, 4)
    with pytest.raises(exc):
        a[key]
    x = make_tensor(a, "int64", device)
    _raises(exc, "getitem", lambda: x[key])
    _raises(exc, "getitem", lambda: x.__setitem__(key, 0))


# ------------------------------------------------------ non-finite linalg input

_NONFINITE = [[[np.nan, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, np.nan]], [[np.inf, 0.0], [0.0, 1.0]],
              [[1.0, 2.0], [np.inf, 1.0]], [[2.0, 1.0], [1.0, 3.0]]]


def _nan_rule(f, a):
    """NumPy's answer, except that a matrix holding a NaN answers all NaN:
    which entries LAPACK's pivoting leaves finite differs between LAPACK
    builds (Debian's NumPy gives all NaN, the PyPI wheels do not)."""
    out = np.array(f(a), dtype=np.float64)
    mats = a.reshape(-1, *a.shape[-2:])
    rows = out.reshape(len(mats), -1)
    for i, m in enumerate(mats):
        if np.isnan(m).any():
            rows[i] = np.nan
    return out


@pytest.mark.parametrize("a", _NONFINITE)
def test_inv_and_solve_of_non_finite_matrices_match_numpy(device, a):
    # A NaN anywhere gives an all-NaN answer (a NaN pivot is not 'singular',
    # which the GPU solver library may report); an inf goes through the arithmetic.
    a = np.array(a)
    x = make_tensor(a, "float64", device)
    assert_close(pf.linalg.inv(x), _nan_rule(np.linalg.inv, a), "float64")
    b = np.array([1.0, 2.0])
    assert_close(pf.linalg.solve(x, make_tensor(b, "float64", device)),
                 _nan_rule(lambda m: np.linalg.solve(m, b), a), "float64")
    batch = np.stack([np.eye(2) * 2, a])  # only the matrix with the NaN is NaN
    assert_close(pf.linalg.inv(make_tensor(batch, "float64", device)), _nan_rule(np.linalg.inv, batch), "float64")


@pytest.mark.parametrize("a", _NONFINITE)
def test_det_and_slogdet_of_non_finite_matrices(device, a):
    # A NaN anywhere: PyTorch's answer (det NaN, slogdet (0, NaN)), whatever
    # the pivoting meets first (NumPy's answer depends on its LAPACK); an inf
    # goes through the arithmetic, as NumPy's.
    a = np.array(a)
    batch = np.stack([np.eye(2) * 2, a, np.array([[0.0, 1.0], [0.0, 2.0]])])  # and an exactly singular one
    x = make_tensor(batch, "float64", device)
    nan = np.isnan(batch).any(axis=(1, 2))
    det = np.where(nan, np.nan, np.linalg.det(np.where(np.isnan(batch), 0, batch)))
    sign, logabs = np.linalg.slogdet(np.where(np.isnan(batch), 0, batch))
    assert_close(pf.linalg.det(x), det, "float64")
    s, l = pf.linalg.slogdet(x)
    assert_close(s, np.where(nan, 0.0, sign), "float64")
    assert_close(l, np.where(nan, np.nan, logabs), "float64")
    if np.isnan(a).any():  # the reference itself
        torch = pytest.importorskip("torch")
        t = torch.tensor(a)
        assert np.isnan(torch.linalg.det(t).item()) and torch.linalg.slogdet(t)[0].item() == 0


@pytest.mark.parametrize("ord_", ["fro", None, [2], "2"])
def test_vector_norm_ord_must_be_a_number(device, ord_):
    _raises(ValueError, "linalg.vector_norm", lambda: pf.linalg.vector_norm(pf.ones(3, device=device), ord=ord_))


# ----------------------------------------- output sizes computed in Python

@pytest.mark.parametrize("kwargs", [dict(size=(2**62, 2**62)), dict(size=(2**31, 2**31)), dict(scale_factor=2**62),
                                    dict(size=(2**64, 1)), dict(scale_factor=float("inf")),
                                    dict(scale_factor=float("nan"))])
def test_interpolate_output_size_is_checked_first(device, kwargs):
    # The sizes used to reach NumPy ('array is too big') or math.floor
    # (OverflowError) before the core's size check.
    x = pf.ones((1, 1, 2, 2), device=device)
    _raises(ValueError, "interpolate", lambda: pf.nn.functional.interpolate(x, **kwargs))
    assert pf.nn.functional.interpolate(x, scale_factor=2).shape == (1, 1, 4, 4)


# ------------------------------------------- pickle, copy, format, int()

@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64", "int64", "int32", "bool", "uint8"])
def test_tensors_pickle_and_copy_exactly(device, dtype):
    import copy
    import pickle
    a = np.array([[1.5, -2.25, 0.0], [3.0, 1000.0, -7.0]])
    x = make_tensor(a, dtype, device)
    for y in (pickle.loads(pickle.dumps(x)), copy.copy(x), copy.deepcopy(x),
              copy.deepcopy({"w": [x]})["w"][0]):
        assert y is not x and y.dtype == x.dtype and y.device == x.device
        np.testing.assert_array_equal(pf._core._to_host_bits(y), pf._core._to_host_bits(x))
    v = pickle.loads(pickle.dumps(x[:, ::2]))  # a strided view: its values
    assert_close(v, x[:, ::2].numpy(), dtype)
    assert pickle.loads(pickle.dumps(pf.zeros((0, 3), device=device))).shape == (0, 3)


def test_copies_of_grad_leaves_and_modules_are_independent(device):
    import copy
    import pickle
    w = pf.ones(2, requires_grad=True, device=device)
    c = copy.deepcopy(w)
    assert c.requires_grad and c.is_leaf and c is not w
    m = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    for m2 in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert [n for n, _ in m2.named_parameters()] == [n for n, _ in m.named_parameters()]
        assert [n for n, _ in m2.named_buffers()] == [n for n, _ in m.named_buffers()]
        assert_close(m2[0].weight, m[0].weight.numpy(), "float32")
        with pf.no_grad():
            m2[0].weight.fill_(0.0)
        assert m[0].weight.numpy().any()  # the original keeps its values
        m2(pf.ones((2, 2), device=device)).sum().backward()
        assert m2[0].weight.grad is not None and m[0].weight.grad is None


def test_format_and_int_of_tensors(device):
    torch = pytest.importorskip("torch")
    assert f"{pf.tensor(2.0, device=device):.3f}" == f"{torch.tensor(2.0):.3f}" == "2.000"
    assert f"{pf.tensor(7, device=device):>4}" == "   7"
    _raises(TypeError, "format", lambda: f"{pf.ones(2, device=device):.3f}")
    assert f"{pf.ones(2, device=device)}" == str(pf.ones(2, device=device))
    assert int(pf.tensor(1e30, device=device)) == int(torch.tensor(1e30))  # beyond int64, as torch
    assert int(pf.tensor(2**62 + 1, device=device)) == 2**62 + 1
    assert int(pf.tensor(-2.7, device=device)) == -2
    with pytest.raises(ValueError):
        int(pf.tensor(float("nan"), device=device))


# ------------------------------------------- sampling without replacement

def test_multinomial_without_replacement_draws_every_category_once(device):
    # As many draws as categories is a permutation. Each draw used to rescan
    # the row (2**20 draws took half a minute); many draws are now one sort.
    n = 2**16
    w = np.random.RandomState(0).rand(n) + 0.1
    w[::7] *= 1e-30  # tiny weights are still drawn
    t = pf.tensor(w.astype(np.float32), device=device)
    draw = pf.multinomial(t, n).numpy()
    assert np.array_equal(np.sort(draw), np.arange(n))
    assert np.mean(draw[:1000] % 7 == 0) < 0.01  # ... last
    pf.manual_seed(3)
    a = pf.multinomial(t[:50], 40).numpy()
    pf.manual_seed(3)
    assert np.array_equal(a, pf.multinomial(t[:50], 40).numpy())
    assert len(set(a.tolist())) == 40


def test_multinomial_with_replacement_draws_by_weight(device):
    pf.manual_seed(1)
    draw = pf.multinomial(pf.tensor([0.0, 1.0, 3.0], device=device), 4000, replacement=True).numpy()
    counts = np.bincount(draw, minlength=3)
    assert counts[0] == 0 and 0.65 < counts[2] / 4000 < 0.85


# ---------------------------------------------------- tensor property setters

@pytest.mark.parametrize("bad", ["yes", 1, None, 1.0, np.True_])
def test_requires_grad_setter_takes_a_bool(device, bad):
    # nanobind's message for a setter names no function ('(): incompatible
    # function arguments'); torch also takes only a bool here.
    x = pf.ones(2, device=device)
    _raises(TypeError, "requires_grad", lambda: setattr(x, "requires_grad", bad))
    assert not x.requires_grad
    x.requires_grad = True
    assert x.requires_grad


@pytest.mark.parametrize("bad", ["a", 5, np.ones(2), [1.0, 1.0]])
def test_grad_setter_takes_a_tensor_or_none(device, bad):
    x = pf.ones(2, requires_grad=True, device=device)
    _raises(TypeError, "grad", lambda: setattr(x, "grad", bad))
    x.grad = pf.full((2,), 3.0, device=device)
    assert_close(x.grad, np.full(2, 3.0), "float32")
    x.grad = None
    assert x.grad is None


# ------------------------------------------------------ generate's arguments

@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    import pyflame.llm
    d = _model_dir(tmp_path_factory.mktemp("gen"), _CFG)
    _weights(d)
    return pyflame.llm.load(d)[0]


@pytest.mark.parametrize("args, kwargs, exc", [
    (("ab", 2), {}, TypeError), ((None, 2), {}, TypeError), (([0.5, 1], 2), {}, TypeError),
    (([[0, 1], ["x"]], 2), {}, TypeError), (([0, 1], 2.5), {}, TypeError), (([0, 1], "3"), {}, TypeError),
    (([0, 1], 2), {"temperature": -1.0}, ValueError), (([0, 1], 2), {"temperature": float("nan")}, ValueError),
    (([0, 1], 2), {"temperature": "hot"}, ValueError), (([0, 1], 2), {"temperature": 1.0, "top_k": 2.5}, TypeError),
    (([0, 1], 2), {"temperature": 1.0, "top_p": "x"}, TypeError), (([0, 1], 2), {"stop": "a"}, TypeError),
])
def test_generate_rejects_bad_arguments_by_name(tiny_model, args, kwargs, exc):
    import pyflame.llm
    _raises(exc, "generate", lambda: pyflame.llm.generate(tiny_model, *args, **kwargs))


def test_generate_accepts_integer_ids_of_any_kind(tiny_model):
    import pyflame.llm
    ref = pyflame.llm.generate(tiny_model, [0, 1], 3)
    assert pyflame.llm.generate(tiny_model, np.array([0, 1]), 3) == ref
    assert pyflame.llm.generate(tiny_model, pf.tensor([[0, 1]]), 3) == [ref]
    assert pyflame.llm.generate(tiny_model, [0, 1], 3, stop=[]) == ref
    _raises(ValueError, "manual_seed", lambda: pyflame.llm.generate(tiny_model, [0, 1], 2, seed="x"))
