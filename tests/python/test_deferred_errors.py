"""Data errors found by kernels (an index or class target out of range):
on the GPU they are read once at the end of the evaluation. Either way the
error names the function, has the same type, comes again on a second read of
a result that rests on it, leaves results that do not rest on it right, and
leaves the process usable."""
import numpy as np
import pytest

import pyflame as pf


@pytest.fixture(params=[False, True], ids=["single", "multi_stream"])
def multi_stream(request):
    prev = pf.multi_stream()
    pf.set_multi_stream(request.param)
    yield request.param
    pf.set_multi_stream(prev)


def _weights():
    return np.arange(10, dtype=np.float32).reshape(5, 2)


def test_embedding_error_at_end_then_again(device, multi_stream):
    w_np = _weights()
    w = pf.tensor(w_np)
    y = pf.embedding(pf.tensor(np.array([1, 7])), w) * 2 + 1  # computed after the bad kernel
    z = pf.sum(w * 3)  # independent of it
    with pytest.raises(IndexError, match=r"^\[embedding\] index 7 is out of range for an embedding of 5 rows"):
        pf.eval(y, z)
    with pytest.raises(IndexError, match=r"^\[embedding\]"):
        y.numpy()
    assert z.item() == float(w_np.sum() * 3)
    ok = pf.embedding(pf.tensor(np.array([4, 0])), w) * 2 + 1
    np.testing.assert_array_equal(ok.numpy(), w_np[[4, 0]] * 2 + 1)


def test_gather_error_in_a_longer_graph(device, multi_stream):
    x_np = np.random.rand(3, 4).astype(np.float32)
    x = pf.tensor(x_np)
    bad = pf.index_select(x, 1, pf.tensor(np.array([0, -1 + 5])))  # 4 is out of range
    out = pf.relu(bad - 0.5).sum()
    with pytest.raises(IndexError, match=r"^\[index_select\] index 4 is out of bounds for axis 1 with size 4"):
        out.item()
    with pytest.raises(IndexError, match=r"^\[index_select\]"):
        out.item()
    good = pf.index_select(x, 1, pf.tensor(np.array([3, 0])))
    np.testing.assert_array_equal(good.numpy(), x_np[:, [3, 0]])


def test_cross_entropy_target_error_with_grad(device, multi_stream):
    logits_np = np.random.randn(4, 3).astype(np.float32)
    logits = pf.tensor(logits_np, requires_grad=True)
    loss = pf.cross_entropy(logits, pf.tensor(np.array([0, 2, 3, 1])))
    with pytest.raises(IndexError, match=r"^\[cross_entropy\] target 3 is out of range for 3 classes"):
        loss.item()
    with pytest.raises(IndexError, match=r"^\[cross_entropy\]"):  # recomputed: still raises
        loss.item()
    fixed = pf.cross_entropy(logits, pf.tensor(np.array([0, 2, 2, 1])))
    fixed.backward()
    assert logits.grad.shape == (4, 3)
    assert np.isfinite(fixed.item())


def _many_lookups(w, ids):
    """One embedding (one range check) per id, summed: one evaluation."""
    return pf.stack([pf.embedding(i, w) for i in ids]).sum(0)


def test_many_checks_in_one_evaluation(device, multi_stream):
    # More check words than one slab holds (eval_context.cc): the first
    # failing check raises, and every lookup is checked.
    w_np = _weights()
    w = pf.tensor(w_np)
    rows = [k % 5 for k in range(700)]
    ids = [pf.tensor(np.array([r])) for r in rows]
    np.testing.assert_allclose(_many_lookups(w, ids).numpy(), w_np[rows].sum(0)[None])
    for bad in (3, 600, 699):
        ids_bad = list(ids)
        ids_bad[bad] = pf.tensor(np.array([6 + bad % 3]))
        with pytest.raises(IndexError, match=rf"^\[embedding\] index {6 + bad % 3} is out of range"):
            _many_lookups(w, ids_bad).numpy()
    np.testing.assert_allclose(_many_lookups(w, ids).numpy(), w_np[rows].sum(0)[None])


def test_many_checks_in_a_compiled_function(device):
    # On a GPU the checks are the captured graph's (sub-allocated there too):
    # each replay reads them and raises the first failed one.
    w_np = _weights()
    w = pf.tensor(w_np)
    f = pf.compile(lambda idx: pf.stack([pf.embedding(idx[k], w) for k in range(600)]).sum(0))
    good = np.arange(600) % 5
    for _ in range(3):
        np.testing.assert_allclose(f(pf.tensor(good.reshape(600, 1))).numpy(), w_np[good].sum(0)[None])
    for bad in (1, 550):
        idx = good.copy()
        idx[bad] = 7
        with pytest.raises(IndexError, match=r"^\[embedding\] index 7 is out of range"):
            f(pf.tensor(idx.reshape(600, 1))).numpy()
        np.testing.assert_allclose(f(pf.tensor(good.reshape(600, 1))).numpy(), w_np[good].sum(0)[None])
