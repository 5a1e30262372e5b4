"""Tensor.register_post_accumulate_grad_hook (PyTorch's hook of that name):
fired once per leaf per backward, after the leaf's .grad holds the
accumulated sum, leaves in the order backward finishes them; kept through
optimizer steps; removable. The gradients are checked against PyTorch."""
import numpy as np
import pytest

import pyflame as pf
import pyflame.nn as nn

torch = pytest.importorskip("torch")


def mlp(seed):
    pf.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3), nn.Tanh(), nn.Linear(3, 2))


def torch_grads(model, x):
    """Gradients of sum(model(x)^2) with PyTorch, from the same weights."""
    params = [torch.tensor(p.numpy(), requires_grad=True) for p in model.parameters()]
    h = torch.tensor(x)
    for i in range(0, len(params), 2):
        h = h @ params[i].T + params[i + 1]
        if i + 2 < len(params):
            h = torch.tanh(h)
    (h ** 2).sum().backward()
    return [p.grad.numpy() for p in params]


def test_hook_fires_once_per_leaf_in_backward_order_and_sees_the_sum():
    model = mlp(0)
    params = list(model.parameters())
    names = [f"{i // 2}.{'weight' if i % 2 == 0 else 'bias'}" for i in range(len(params))]
    calls = []
    for name, p in zip(names, params):
        p.register_post_accumulate_grad_hook(
            lambda t, name=name: calls.append((name, t.grad.numpy().copy())))
    x = np.random.default_rng(1).normal(size=(6, 4)).astype(np.float32)
    want = torch_grads(model, x)

    (model(pf.tensor(x)) ** 2).sum().backward()
    assert sorted(n for n, _ in calls) == sorted(names)  # once each
    layers = [n.split(".")[0] for n, _ in calls]
    assert layers == sorted(layers, reverse=True), layers  # last layer first
    for name, g in calls:
        np.testing.assert_allclose(g, want[names.index(name)], rtol=1e-5, atol=1e-6, err_msg=name)

    # a second backward accumulates: the hook sees the sum of both
    calls.clear()
    (model(pf.tensor(x)) ** 2).sum().backward()
    assert len(calls) == len(params)
    for name, g in calls:
        np.testing.assert_allclose(g, 2 * want[names.index(name)], rtol=1e-5, atol=1e-6, err_msg=name)


def test_hook_on_a_leaf_used_twice_fires_once():
    w = pf.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.numpy().copy()))
    ((w * w).sum() + (3 * w).sum()).backward()
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], 2 * np.array([1.0, 2.0]) + 3)


def test_hook_kept_through_optimizer_steps_and_removable():
    model = mlp(2)
    w = model[0].weight
    count = []
    handle = w.register_post_accumulate_grad_hook(lambda t: count.append(1))
    opt = pf.optim.SGD(model.parameters(), lr=0.1)
    x = pf.tensor(np.ones((2, 4), np.float32))
    for _ in range(2):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()  # rebinds the parameters: the hook stays
    assert len(count) == 2
    handle.remove()
    handle.remove()  # twice is harmless
    model(x).sum().backward()
    assert len(count) == 2


def test_hook_errors():
    w = pf.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match=r"\[register_post_accumulate_grad_hook\] only a leaf"):
        (w * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(ValueError, match=r"\[register_post_accumulate_grad_hook\] only a leaf"):
        pf.tensor([1.0]).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(TypeError, match="callable"):
        w.register_post_accumulate_grad_hook(3)

    def boom(t):
        raise KeyError("from the hook")

    w.register_post_accumulate_grad_hook(boom)
    with pytest.raises(KeyError, match="from the hook"):
        (w * 2).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [2.0])  # accumulated before the hook ran


def test_functional_grad_fires_no_hook():
    w = pf.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    w.register_post_accumulate_grad_hook(lambda t: seen.append(1))
    g, = pf.autograd.grad((w * w).sum(), [w])
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])
    assert not seen and w.grad is None
