"""Training on the reference backend (issue 15): the digits CNN, 10 epochs of SGD with momentum
on scikit-learn's digits (20 % held out), against torch training the same network on the same
batches in the same process (both single-threaded).

Target: ≥ 95 % validation accuracy in under 60 s on 2 cores.
"""

from __future__ import annotations

import time

import numpy as np

TARGET_S, TARGET_ACCURACY = 60.0, 0.95


def _torch_seconds(x: np.ndarray, y: np.ndarray, epochs: int, batch: int) -> float | None:
    """The same CNN, optimizer and batch size in torch (the anchor); None without torch."""
    try:
        import torch
    except ImportError:
        return None
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
        torch.nn.Linear(128, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    start = time.perf_counter()
    for _ in range(epochs):
        for k in range(len(x) // batch):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(xt[k * batch:(k + 1) * batch]),
                                              yt[k * batch:(k + 1) * batch]).backward()
            opt.step()
    return time.perf_counter() - start


def main() -> int:
    import nnbridge
    import nnbridge.zoo
    from nnbridge.training import digits, train

    x, y = digits()
    with nnbridge.cpu_threads(1):
        start = time.perf_counter()
        result = train(nnbridge.zoo.build("digits_cnn", batch=32), x, y, epochs=10, batch_size=32, lr=0.05)
        seconds = time.perf_counter() - start
        keep = np.random.default_rng(0).permutation(len(x))[round(len(x) * 0.2):]
        anchor = _torch_seconds(x[keep], y[keep], 10, 32)
    accuracy = result.history[-1].val_accuracy
    ratio = f"{seconds / anchor:.2f}×" if anchor else "n/a (no torch)"
    print("| model | epochs | nnbridge s | torch s | ratio | val accuracy |")
    print("|---|---|---|---|---|---|")
    print(f"| digits_cnn | 10 | {seconds:.2f} | {anchor if anchor is None else f'{anchor:.2f}'} | {ratio} | "
          f"{100 * accuracy:.1f} % |")
    ok = seconds < TARGET_S and accuracy >= TARGET_ACCURACY
    print(f"target: ≥ {100 * TARGET_ACCURACY:.0f} % in < {TARGET_S:.0f} s — {'met' if ok else 'MISSED'}")
    return 0 if ok else 1
