"""Training with pf.nn + autograd + pf.optim: parameters are grad leaves
through every module operation, an MLP's loss falls on every device, and
CPU and GPU runs from the same seed agree."""
import numpy as np
import pytest

import pyflame as pf
import pyflame.nn as nn


def cross_entropy(logits, target):
    """Mean cross-entropy from log_softmax and a one-hot mask (ops that have
    gradients on every build)."""
    classes = logits.shape[-1]
    onehot = pf.eq(pf.arange(classes, dtype="int64", device=logits.device),
                   pf.unsqueeze(target, 1)).astype(logits.dtype)
    return -(pf.log_softmax(logits, -1) * onehot).sum() / logits.shape[0]


def blobs(n, dim, classes, seed, device):
    """A learnable task: Gaussian clusters around fixed class centers."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((classes, dim)).astype(np.float32) * 2.0
    y = rng.integers(0, classes, n)
    x = centers[y] + rng.standard_normal((n, dim)).astype(np.float32)
    return pf.tensor(x, device=device), pf.tensor(y.astype(np.int64), device=device)


def mlp(device):
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 4)).to(device)


# ------------------------------------------------------ parameters as leaves

def test_parameter_is_a_grad_leaf():
    t = pf.randn(3, 2)
    p = nn.Parameter(t)
    assert p.data is t and t.requires_grad and t.is_leaf and p.requires_grad
    p.requires_grad = False
    assert not t.requires_grad and not p.requires_grad
    p.requires_grad_()
    assert t.requires_grad
    # a tensor with history is detached into a fresh leaf
    x = pf.randn(2, requires_grad=True)
    q = nn.Parameter(x * 2)
    assert q.data.is_leaf and q.requires_grad and q.data is not x
    # integer tensors cannot require grad
    with pytest.raises(ValueError, match="floating-point"):
        nn.Parameter(pf.arange(3, dtype="int64"))
    assert not nn.Parameter(pf.arange(3, dtype="int64"), requires_grad=False).requires_grad
    # .grad reads and writes through the record; .data keeps the flag
    p.grad = pf.ones(3, 2)
    np.testing.assert_array_equal(t.grad.numpy(), np.ones((3, 2)))
    p.data = pf.zeros(3, 2)
    assert p.data.requires_grad and p.data.is_leaf


def test_module_flags_zero_grad_and_backward(device):
    model = mlp(device)
    assert all(p.requires_grad and p.is_leaf for p in model.parameters())
    x, y = blobs(8, 16, 4, 0, device)
    cross_entropy(model(x), y).backward()
    assert all(p.grad is not None and p.grad.device == p.device for p in model.parameters())
    model.zero_grad(set_to_none=False)
    assert all(not p.grad.numpy().any() for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    model.requires_grad_(False)
    assert not any(p.requires_grad for p in model.parameters())
    assert not model(x).requires_grad
    model[0].requires_grad_(True)
    cross_entropy(model(x), y).backward()
    assert model[0].weight.grad is not None and model[2].weight.grad is None


def test_to_load_state_dict_and_init_keep_parameters_trainable(device):
    model = mlp("cpu")
    x, y = blobs(8, 16, 4, 1, "cpu")
    cross_entropy(model(x), y).backward()
    w = model[0].weight
    model.to(device)
    assert model[0].weight is w and w.device.split(":")[0] == device.split(":")[0]
    assert w.requires_grad and w.is_leaf
    assert w.grad is not None and w.grad.device == w.device  # the gradient moved along
    other = mlp(device)
    other.load_state_dict(model.state_dict())
    np.testing.assert_array_equal(other[0].weight.numpy(), w.numpy())
    nn.init.zeros_(other[2].bias)
    for p in other.parameters():
        assert p.requires_grad and p.is_leaf
    xd, yd = x.to(device), y.to(device)
    cross_entropy(other(xd), yd).backward()
    assert all(p.grad is not None for p in other.parameters())
    # state_dict values loaded elsewhere are independent leaves
    w.grad = None
    other[0].weight.grad = None
    (other[0].weight * 2).sum().backward()
    assert w.grad is None


def test_batch_norm_running_stats_stay_plain_buffers(device):
    bn = nn.BatchNorm1d(4).to(device)
    x = pf.randn(8, 4, device=device, requires_grad=True)
    for _ in range(3):
        bn(x * 1.5)
    assert not bn.running_mean.requires_grad and not bn.running_var.requires_grad
    assert bn.weight.requires_grad and bn.bias.requires_grad and bn.weight.is_leaf
    np.testing.assert_allclose(bn.running_mean.numpy(),
                               (1 - 0.9 ** 3) * 1.5 * x.numpy().mean(0), rtol=1e-4, atol=1e-5)
    assert int(bn.num_batches_tracked.item()) == 3


# ----------------------------------------------------------------- training

@pytest.mark.parametrize("opt_name,kwargs", [("SGD", dict(lr=0.1, momentum=0.9)),
                                             ("Adam", dict(lr=1e-2)),
                                             ("AdamW", dict(lr=1e-2))])
def test_mlp_loss_falls(device, opt_name, kwargs):
    pf.manual_seed(0)
    model = mlp(device)
    opt = getattr(pf.optim, opt_name)(model.parameters(), **kwargs)
    x, y = blobs(256, 16, 4, 2, device)
    losses = []
    for _ in range(40):
        opt.zero_grad()
        loss = cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.25 * losses[0], losses
    with pf.no_grad():
        accuracy = (model(x).numpy().argmax(-1) == y.numpy()).mean()
    assert accuracy > 0.9


def _train(device, steps):
    pf.manual_seed(123)  # the same initial weights on every device
    model = mlp(device)
    # SGD keeps device rounding differences proportional (Adam's normalized
    # steps would turn a gradient of 0 vs 1e-9 into a full step)
    opt = pf.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
    sched = pf.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    x, y = blobs(64, 16, 4, 3, device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    return [p.numpy() for p in model.parameters()], losses


def test_cpu_and_gpu_training_agree(gpu_device):
    cpu_params, cpu_losses = _train("cpu", 8)
    gpu_params, gpu_losses = _train(gpu_device, 8)
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-4, atol=1e-5)
    for a, b in zip(cpu_params, gpu_params):
        np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-4)
