"""Training data: an .npz of x and y, scikit-learn's digits, and the seeded training/validation split."""

from __future__ import annotations

import os

import numpy as np

from ..base.errors import FormatError, InputError


def load_data(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """``x`` and ``y`` of an ``.npz`` file (no pickles)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = [k for k in ("x", "y") if k not in data.files]
            if missing:
                raise FormatError(f"{path}: has no array {' or '.join(map(repr, missing))}; training data is an "
                                  f".npz with x (samples) and y (labels or targets), e.g. np.savez(path, x=x, y=y)")
            return data["x"], data["y"]
    except (OSError, ValueError) as exc:
        raise FormatError(f"{path}: not a readable .npz file ({exc})") from None


def digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's handwritten digits (1,797 8×8 images, 10 classes) as x (N,1,8,8) in [0, 1], y."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise InputError("the digits data comes with scikit-learn: pip install scikit-learn") from None
    data = load_digits()
    return (data.images[:, None] / 16.0).astype(np.float32), data.target.astype(np.int64)


def split_indices(count: int, val_split: float, seed: int, batch: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Training and validation indices: a seeded shuffle, the validation share held out."""
    order = np.random.default_rng(seed).permutation(count)
    n_val = int(round(count * val_split))
    if count - n_val < batch:
        raise InputError(f"{count - n_val} training samples are fewer than {what} of {batch}")
    return order[n_val:], order[:n_val]
