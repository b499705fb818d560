"""Training (issue 15).

1. On the reference backend: the digits CNN, 10 epochs of SGD with momentum on scikit-learn's
   digits (20 % held out), against torch training the same network on the same batches in the same
   process (both single-threaded). Target: ≥ 95 % validation accuracy in under 60 s on 2 cores.
2. On the RDU model (SN40L preset): a training step (fwd, bwd and opt sections) against inference
   for a BERT-base-sized encoder and ResNet-50 — throughput, FLOP per sample and the step's split.
   A step does about three forward passes of work (the backward pass computes the gradients of
   both the activations and the weights).
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
    _rdu_training()
    return 0 if ok else 1


def _rdu_training() -> None:
    import os

    import onnx

    import nnbridge
    from nnbridge.passes import run_passes
    from nnbridge.training import compile_training
    from nnbridge.zoo import bert_base

    resnet = nnbridge.load(os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/light/light_resnet50.onnx"))
    run_passes(resnet, ["fold"])  # its weights are ConstantOfShape outputs: make them tensors to train
    cases = [("BERT-base-sized encoder (seq 128)", bert_base(batch=4, seq=128), 4, "mse"),
             ("ResNet-50 (224×224)", resnet, 1, "cross-entropy")]
    print("\n| model (SN40L, o1) | batch | inference samples/s | training samples/s | ratio | "
          "GFLOP/sample inf → train | step: fwd / bwd / opt µs |")
    print("|---|---|---|---|---|---|---|")
    for name, model, batch, loss in cases:
        inference = nnbridge.compile(model, backend="rdu", batch_size=batch).estimate.totals
        training = compile_training(model, batch_size=batch, loss=loss).estimate.totals
        split = " / ".join(f"{training['latency_us_by_kind'].get(k, 0):,.0f}" for k in ("fwd", "bwd", "opt"))
        print(f"| {name} | {batch} | {inference['throughput_samples_per_s']:,.0f} | "
              f"{training['throughput_samples_per_s']:,.0f} | "
              f"{training['throughput_samples_per_s'] / inference['throughput_samples_per_s']:.2f} | "
              f"{inference['flop_per_sample'] / 1e9:.1f} → {training['flop_per_sample'] / 1e9:.1f} | {split} |")
