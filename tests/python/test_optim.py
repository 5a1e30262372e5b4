"""pf.optim against torch.optim: every option of SGD, Adam and AdamW over
many steps on identical parameters and gradients, parameter groups, state
dicts, and the learning-rate schedules."""
import math
import warnings

import numpy as np
import pytest

import pyflame as pf

torch = pytest.importorskip("torch")

SHAPES = [(5, 3), (4,)]
STEPS = 40


def _problem(seed):
    """Initial parameters, per-step noise and curvature: the loss at step k
    is sum(c * p^2) / 2 + sum(n_k * p), so grad = c * p + n_k depends on the
    parameters (momentum and the moments see a real trajectory)."""
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    curv = [rng.uniform(0.5, 2.0, s).astype(np.float32) for s in SHAPES]
    noise = [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(STEPS)]
    return init, curv, noise


def _loss(lib, params, curv, noise):
    total = None
    for p, c, n in zip(params, curv, noise):
        term = (c * p * p).sum() * 0.5 + (n * p).sum()
        total = term if total is None else total + term
    return total


def _run_pf(make, init, curv, noise, device, steps=range(STEPS), params=None, opt=None):
    if params is None:
        params = [pf.tensor(a, device=device, requires_grad=True) for a in init]
    c = [pf.tensor(a, device=device) for a in curv]
    if opt is None:
        opt = make(params)
    for k in steps:
        opt.zero_grad()
        _loss(pf, params, c, [pf.tensor(a, device=device) for a in noise[k]]).backward()
        opt.step()
    return params, opt


def _run_torch(make, init, curv, noise, steps=range(STEPS), params=None, opt=None):
    if params is None:
        params = [torch.tensor(a, requires_grad=True) for a in init]
    c = [torch.tensor(a) for a in curv]
    if opt is None:
        opt = make(params)
    for k in steps:
        opt.zero_grad()
        _loss(torch, params, c, [torch.tensor(a) for a in noise[k]]).backward()
        opt.step()
    return params, opt


def _grouped(cls, opts, group_opts):
    """Two parameter groups: the defaults for the first, overrides for the second."""
    return lambda ps: cls([{"params": [ps[0]]}, dict(group_opts, params=[ps[1]])], **opts)


CASES = [
    ("SGD", dict(lr=0.1), {}),
    ("SGD", dict(lr=0.05, momentum=0.9), dict(lr=0.02)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3), {}),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True), dict(momentum=0.5)),
    ("SGD", dict(lr=0.05, momentum=0.5, weight_decay=0.1), dict(weight_decay=0.0)),
    ("SGD", dict(lr=0.01, momentum=0.9, maximize=True), {}),
    ("Adam", dict(lr=0.01), {}),
    ("Adam", dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6), dict(lr=0.005)),
    ("Adam", dict(lr=0.01, weight_decay=0.1), {}),
    ("Adam", dict(lr=0.01, amsgrad=True), dict(betas=(0.5, 0.9))),
    ("Adam", dict(lr=0.01, maximize=True, amsgrad=True, weight_decay=0.05), {}),
    ("AdamW", dict(lr=0.01), {}),
    ("AdamW", dict(lr=0.01, weight_decay=0.1, amsgrad=True), dict(weight_decay=0.5)),
    ("AdamW", dict(lr=0.02, betas=(0.7, 0.95), maximize=True), {}),
]


@pytest.mark.parametrize("name,opts,group_opts", CASES,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(CASES)])
def test_matches_torch(device, name, opts, group_opts):
    init, curv, noise = _problem(sum(map(ord, name)) + 10 * len(opts) + len(group_opts))
    ours, _ = _run_pf(_grouped(getattr(pf.optim, name), opts, group_opts), init, curv, noise,
                      device)
    ref, _ = _run_torch(_grouped(getattr(torch.optim, name), opts, group_opts), init, curv, noise)
    for p, t in zip(ours, ref):
        assert p.device.split(":")[0] == device.split(":")[0]
        assert p.is_leaf and p.requires_grad
        np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name,opts", [
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
])
def test_state_dict_round_trip(device, name, opts):
    init, curv, noise = _problem(7)
    make = lambda ps: getattr(pf.optim, name)(ps, **opts)  # noqa: E731
    half = range(STEPS // 2)
    rest = range(STEPS // 2, STEPS)
    straight, _ = _run_pf(make, init, curv, noise, device)
    params, opt = _run_pf(make, init, curv, noise, device, steps=half)
    sd = opt.state_dict()
    # a fresh optimizer over copies of the parameters continues identically
    copies = [pf.tensor(p.numpy(), device=device, requires_grad=True) for p in params]
    opt2 = make(copies)
    opt2.load_state_dict(sd)
    resumed, _ = _run_pf(make, init, curv, noise, device, steps=rest, params=copies, opt=opt2)
    for a, b in zip(straight, resumed):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)
    # torch's layout: indices for parameters, the same state and group keys
    ref_params, ref_opt = _run_torch(lambda ps: getattr(torch.optim, name)(ps, **opts),
                                     init, curv, noise, steps=half)
    tsd = ref_opt.state_dict()
    assert sd["param_groups"][0]["params"] == tsd["param_groups"][0]["params"] == [0, 1]
    assert set(sd["param_groups"][0]) <= set(tsd["param_groups"][0])
    assert set(sd["state"]) == set(tsd["state"])
    for i in sd["state"]:
        assert set(sd["state"][i]) == set(tsd["state"][i])
        for k, v in sd["state"][i].items():
            want = tsd["state"][i][k]
            got = v if isinstance(v, (int, float)) else v.numpy()
            np.testing.assert_allclose(got, want.numpy() if hasattr(want, "numpy") else want,
                                       rtol=2e-5, atol=2e-6)
    # the state follows the parameters' device
    for st in opt2.state.values():
        for v in st.values():
            if isinstance(v, pf.Tensor):
                assert v.device == copies[0].device


def test_loads_a_torch_state_dict(device):
    """torch's state dict (torch tensors, a tensor step) continues in pf."""
    init, curv, noise = _problem(11)
    opts = dict(lr=0.01, amsgrad=True, weight_decay=0.01)
    half, rest = range(10), range(10, 20)
    tparams, topt = _run_torch(lambda ps: torch.optim.Adam(ps, **opts), init, curv, noise, half)
    params = [pf.tensor(p.detach().numpy(), device=device, requires_grad=True) for p in tparams]
    opt = pf.optim.Adam(params, **opts)
    opt.load_state_dict(topt.state_dict())
    assert opt.state[params[0]]["step"] == 10
    _run_pf(None, init, curv, noise, device, steps=rest, params=params, opt=opt)
    _run_torch(None, init, curv, noise, steps=rest, params=tparams, opt=topt)
    for p, t in zip(params, tparams):
        np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=2e-5, atol=2e-6)


def test_param_groups_and_errors():
    a = pf.zeros(3, requires_grad=True)
    b = pf.zeros(2, requires_grad=True)
    opt = pf.optim.SGD([a], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": b, "lr": 0.5})
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["momentum"] == 0.9 and opt.param_groups[1]["params"][0] is b
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(ValueError, match="required optimization parameter lr"):
        pf.optim.SGD([a])
    with pytest.raises(ValueError, match="empty parameter list"):
        pf.optim.Adam([])
    with pytest.raises(TypeError, match="iterable of Tensors"):
        pf.optim.Adam(a)
    with pytest.raises(ValueError, match="non-leaf"):
        pf.optim.Adam([a * 2])
    with pytest.raises(TypeError, match="ordered collections"):
        pf.optim.Adam({a})
    with pytest.raises(ValueError, match="Invalid learning rate"):
        pf.optim.Adam([a], lr=-1)
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        pf.optim.Adam([a], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Nesterov"):
        pf.optim.SGD([a], lr=0.1, nesterov=True)
    assert "Parameter Group 1" in repr(opt) and "lr: 0.5" in repr(opt)
    # parameters without a gradient are skipped; nn.Parameter records are accepted
    w = pf.nn.Parameter(pf.ones(2))
    opt = pf.optim.SGD([w, a], lr=1.0)
    w.grad = pf.ones(2)
    opt.step()
    np.testing.assert_array_equal(w.data.numpy(), [0.0, 0.0])
    np.testing.assert_array_equal(a.numpy(), [0.0, 0.0, 0.0])
    assert opt.param_groups[0]["params"][0] is w.data and w.data.requires_grad


def test_zero_grad_and_closure(device):
    p = pf.tensor([1.0, 2.0], device=device, requires_grad=True)
    opt = pf.optim.SGD([p], lr=0.1)
    (p * p).sum().backward()
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad.numpy(), [0.0, 0.0])
    opt.zero_grad()
    assert p.grad is None

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss
    with pf.no_grad():  # the closure re-enables grad
        loss = opt.step(closure)
    assert loss.item() == pytest.approx(5.0)
    np.testing.assert_allclose(p.numpy(), [0.8, 1.6], rtol=1e-6)
    assert opt.state.get(p) is None and p not in opt.state  # plain SGD keeps no state


def test_step_keeps_the_tensor_objects_and_evaluates():
    lin = pf.nn.Linear(3, 2)
    w = lin.weight
    opt = pf.optim.Adam(lin.parameters(), lr=0.1)
    lin(pf.randn(4, 3)).sum().backward()
    before = w.numpy().copy()
    opt.step()
    assert lin.weight is w and w.is_leaf and w.requires_grad and w.is_evaluated
    assert w.grad is not None  # the gradient stays until zero_grad
    assert not np.allclose(before, w.numpy())
    assert all(v.is_evaluated for v in opt.state[w].values() if isinstance(v, pf.Tensor))


# ------------------------------------------------------------ LR schedules

def _schedulers(lib, name, kwargs, lr=0.1):
    p = (torch.zeros(1, requires_grad=True) if lib is torch
         else pf.zeros(1, requires_grad=True))
    opt = lib.optim.SGD([{"params": [p]}], lr=lr)
    return opt, getattr(lib.optim.lr_scheduler, name)(opt, **kwargs)


SCHEDULES = [
    ("StepLR", dict(step_size=7)),
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[5, 20, 20, 60], gamma=0.3)),
    ("ExponentialLR", dict(gamma=0.97)),
    ("CosineAnnealingLR", dict(T_max=10)),
    ("CosineAnnealingLR", dict(T_max=37, eta_min=0.001)),
]


@pytest.mark.parametrize("name,kwargs", SCHEDULES, ids=[f"{n}-{i}" for i, (n, _) in
                                                      enumerate(SCHEDULES)])
def test_schedules_match_torch(name, kwargs):
    opt, sched = _schedulers(pf, name, kwargs)
    topt, tsched = _schedulers(torch, name, kwargs)
    assert sched.get_last_lr() == tsched.get_last_lr()
    for _ in range(150):
        opt.step()
        topt.step()
        sched.step()
        tsched.step()
        np.testing.assert_allclose(sched.get_last_lr(), tsched.get_last_lr(), rtol=1e-12,
                                   atol=1e-15)
        assert opt.param_groups[0]["lr"] == sched.get_last_lr()[0]
    # the closed form (step(epoch)), deprecated in torch too
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for epoch in (3, 40, 7):
            sched.step(epoch)
            tsched.step(epoch)
            np.testing.assert_allclose(sched.get_last_lr(), tsched.get_last_lr(), rtol=1e-12)


def test_schedule_state_dict_round_trip():
    opt, sched = _schedulers(pf, "CosineAnnealingLR", dict(T_max=20, eta_min=0.01))
    for _ in range(7):
        opt.step()
        sched.step()
    sd = sched.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 7
    opt2, sched2 = _schedulers(pf, "CosineAnnealingLR", dict(T_max=5))
    sched2.load_state_dict(sd)
    opt2.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
    for _ in range(30):
        for o, s in ((opt, sched), (opt2, sched2)):
            o.step()
            s.step()
        assert sched.get_last_lr() == sched2.get_last_lr()
    # resuming from last_epoch needs initial_lr in the groups
    with pytest.raises(KeyError, match="initial_lr"):
        pf.optim.lr_scheduler.StepLR(pf.optim.SGD([pf.zeros(1, requires_grad=True)], lr=1.0),
                                     step_size=2, last_epoch=3)
    with pytest.raises(TypeError, match="not an Optimizer"):
        pf.optim.lr_scheduler.StepLR(object(), step_size=2)
    assert math.isclose(opt.param_groups[0]["initial_lr"], 0.1)
