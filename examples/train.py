"""Train an MLP and a small CNN on a synthetic image task with PyFlame.

    python examples/train.py                          # best device, both models
    python examples/train.py --device cpu --epochs 4 --model cnn
    python examples/train.py --amp                    # mixed precision

Each 12x12 image holds one of four strokes (horizontal, vertical, diagonal,
anti-diagonal) at a random place, plus noise; the models learn to name the
stroke. The script prints the test accuracy of each model and exits with
status 1 if one stays below --target.
"""
import argparse
import sys
import time

import numpy as np

import pyflame as pf
import pyflame.nn as nn
import pyflame.nn.functional as F

SIZE, CLASSES = 12, 4


def make_data(n, rng):
    """n noisy images (n, 1, SIZE, SIZE) and their labels."""
    x = rng.normal(0.0, 0.3, (n, 1, SIZE, SIZE)).astype(np.float32)
    y = rng.integers(0, CLASSES, n)
    steps = {0: (0, 1), 1: (1, 0), 2: (1, 1), 3: (1, -1)}  # (row, col) step per class
    for i, label in enumerate(y):
        dr, dc = steps[label]
        r = rng.integers(0, SIZE - 4)
        c = rng.integers(4, SIZE) if dc < 0 else rng.integers(0, SIZE - 4)
        for k in range(5):
            x[i, 0, r + dr * k, c + dc * k] += 1.0
    return x, y.astype(np.int64)


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(SIZE * SIZE, 128), nn.ReLU(),
                         nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, CLASSES))


def cnn():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(16 * (SIZE // 4) ** 2, CLASSES))


def progress(label, done, total, loss):
    """A one-line progress bar on stderr."""
    filled = 24 * done // total
    sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (24 - filled)}] {done}/{total} "
                     f"loss {loss:.3f}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def train(name, model, data, args):
    (x_train, y_train), (x_test, y_test) = data
    model.to(args.device)
    opt = pf.optim.AdamW(model.parameters(), lr=args.lr)
    batches = len(x_train) // args.batch
    sched = pf.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * batches)
    low = pf.float16 if args.device != "cpu" else pf.bfloat16  # CPU: bfloat16 needs no scaling
    scaler = pf.amp.GradScaler(enabled=args.amp and low == pf.float16)
    rng = np.random.default_rng(1)
    for epoch in range(args.epochs):
        order = rng.permutation(len(x_train))
        for b in range(batches):
            idx = order[b * args.batch:(b + 1) * args.batch]
            x = pf.tensor(x_train[idx], device=args.device)
            y = pf.tensor(y_train[idx], device=args.device)
            opt.zero_grad()
            with pf.amp.autocast(dtype=low, enabled=args.amp):
                loss = F.cross_entropy(model(x).astype(pf.float32), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            sched.step()
            if b % 8 == 7 or b == batches - 1:
                progress(f"{name} epoch {epoch + 1}/{args.epochs}", b + 1, batches, loss.item())
    model.eval()
    with pf.no_grad():
        logits = model(pf.tensor(x_test, device=args.device))
    return float((logits.numpy().argmax(-1) == y_test).mean())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto", help="auto (rocm if available), cpu or rocm[:N]")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--amp", action="store_true",
                    help="autocast to float16 (GPU, with a GradScaler) or bfloat16 (CPU)")
    ap.add_argument("--model", choices=["mlp", "cnn", "both"], default="both")
    ap.add_argument("--target", type=float, default=0.9, help="test accuracy to reach")
    args = ap.parse_args(argv)
    if args.device == "auto":
        args.device = "rocm" if pf.rocm_is_available() else "cpu"
    pf.manual_seed(0)
    rng = np.random.default_rng(0)
    data = make_data(8192, rng), make_data(1024, rng)
    failed = False
    for name, build in (("mlp", mlp), ("cnn", cnn)):
        if args.model not in (name, "both"):
            continue
        t0 = time.perf_counter()
        accuracy = train(name, build(), data, args)
        ok = accuracy >= args.target
        failed |= not ok
        print(f"{name}: test accuracy {accuracy:.3f} (target {args.target}) on {args.device}"
              f"{' with amp' if args.amp else ''}, {time.perf_counter() - t0:.1f} s"
              f"{'' if ok else '  BELOW TARGET'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
