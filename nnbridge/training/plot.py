"""Training curves: loss and accuracy per epoch as a PNG."""

from __future__ import annotations

import os
from pathlib import Path

from .loop import Epoch


def plot_history(history: list[Epoch], path: str | os.PathLike, title: str = "training") -> Path:
    """Loss (left) and accuracy (right) per epoch, training and validation, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [e.epoch for e in history]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    left.plot(epochs, [e.loss for e in history], "o-", label="training")
    if any(e.val_loss is not None for e in history):
        left.plot(epochs, [e.val_loss for e in history], "s-", label="validation")
    left.set(xlabel="epoch", ylabel="loss", title=f"{title}: loss")
    left.legend()
    if any(e.accuracy is not None for e in history):
        right.plot(epochs, [100 * e.accuracy for e in history], "o-", label="training")
        if any(e.val_accuracy is not None for e in history):
            right.plot(epochs, [100 * e.val_accuracy for e in history], "s-", label="validation")
        right.set(xlabel="epoch", ylabel="accuracy (%)", title=f"{title}: accuracy", ylim=(0, 100))
        right.legend()
    else:
        right.axis("off")
    from ..base.fileio import atomic_write

    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)
    return Path(path)
