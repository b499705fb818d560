"""Tensor ops of the ``ai.onnx.ml`` domain: Binarizer, ArrayFeatureExtractor and
LabelEncoder (a vectorised lookup through sorted keys)."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._common import NUMERIC

ML = "ai.onnx.ml"


@kernel("Binarizer", domain=ML, dtypes=NUMERIC)
def binarizer(ctx, x):
    threshold = ctx.node.attrs.get("threshold", 0.0)
    return (x > threshold).astype(x.dtype)


@kernel("ArrayFeatureExtractor", domain=ML)
def array_feature_extractor(ctx, x, indices):
    """Pick ``indices`` along the last axis; a 1-D input gives a [1, k] row."""
    picked = np.take(x, np.asarray(indices, np.int64).reshape(-1), axis=-1)
    return picked.reshape(1, -1) if x.ndim == 1 else picked


_KEYS = {"keys_int64s": np.int64, "keys_floats": np.float32, "keys_strings": object, "keys_tensor": None}
_VALUES = {"values_int64s": (np.int64, "default_int64", -1), "values_floats": (np.float32, "default_float", -0.0),
           "values_strings": (object, "default_string", "_Unused"), "values_tensor": (None, None, None)}


def _attribute(node, table):
    present = [name for name in table if node.attrs.get(name) is not None]
    return present[0] if len(present) == 1 else None


def _check_label_encoder(node):
    keys_name = _attribute(node, _KEYS)
    if keys_name is None or _attribute(node, _VALUES) is None:
        return "LabelEncoder needs exactly one keys_* and one values_* attribute"
    keys = np.asarray(node.attrs[keys_name], dtype=_KEYS[keys_name]).reshape(-1)
    if len(np.unique(keys)) != len(keys):  # the spec says the last wins, onnxruntime takes the first
        return "repeated keys are ambiguous"
    return None


def _mapping(node) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    keys_name, values_name = _attribute(node, _KEYS), _attribute(node, _VALUES)
    keys = np.asarray(node.attrs[keys_name], dtype=_KEYS[keys_name]).reshape(-1)
    dtype, default_name, default = _VALUES[values_name]
    values = np.asarray(node.attrs[values_name], dtype=dtype).reshape(-1)
    if node.attrs.get("default_tensor") is not None:
        fallback = np.asarray(node.attrs["default_tensor"]).reshape(-1)[:1]
    else:
        fallback = np.asarray([node.attrs.get(default_name, default) if default_name else 0], dtype=values.dtype)
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys for {len(values)} values")
    order = np.argsort(keys, kind="stable")
    return keys[order], values[order], fallback.astype(values.dtype)


@kernel("LabelEncoder", domain=ML, check=_check_label_encoder)
def label_encoder(ctx, x):
    keys, values, fallback = _mapping(ctx.node)
    if x.dtype == object:
        keys = keys.astype(object)
    out = np.full(x.shape, fallback[0], dtype=values.dtype)
    if not keys.size:
        return out
    slot = np.clip(np.searchsorted(keys, x), 0, keys.size - 1)
    found = keys[slot] == x
    if keys.dtype.kind == "f":  # a NaN key matches every NaN input
        nan_keys = np.flatnonzero(np.isnan(keys))
        if nan_keys.size:
            slot = np.where(np.isnan(x), nan_keys[0], slot)
            found = found | np.isnan(x)
    out[found] = values[slot[found]]
    return out


