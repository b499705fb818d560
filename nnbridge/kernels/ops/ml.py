"""Tensor ops of the ``ai.onnx.ml`` domain: Binarizer, ArrayFeatureExtractor and
LabelEncoder (a vectorised lookup through sorted keys)."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._common import NUMERIC, one_given

ML = "ai.onnx.ml"


@kernel("Binarizer", domain=ML, dtypes=NUMERIC)
def binarizer(ctx, x, *, threshold=0.0):
    return (x > threshold).astype(x.dtype)


@kernel("ArrayFeatureExtractor", domain=ML)
def array_feature_extractor(ctx, x, indices):
    """Pick ``indices`` along the last axis; a 1-D input gives a [1, k] row."""
    picked = np.take(x, np.asarray(indices, np.int64).reshape(-1), axis=-1)
    return picked.reshape(1, -1) if x.ndim == 1 else picked


#: LabelEncoder's keys_* and values_* attributes, in the order of its keywords → element type
_KEYS = {"keys_int64s": np.int64, "keys_floats": np.float32, "keys_strings": object, "keys_tensor": None}
_VALUES = {"values_int64s": np.int64, "values_floats": np.float32, "values_strings": object, "values_tensor": None}


def _check_label_encoder(node, *, keys_int64s=None, keys_floats=None, keys_strings=None, keys_tensor=None,
                         values_int64s=None, values_floats=None, values_strings=None, values_tensor=None):
    keys = one_given(_KEYS, (keys_int64s, keys_floats, keys_strings, keys_tensor))
    if keys is None or one_given(_VALUES, (values_int64s, values_floats, values_strings, values_tensor)) is None:
        return "LabelEncoder needs exactly one keys_* and one values_* attribute"
    keys_name, given = keys
    keys = np.asarray(given, dtype=_KEYS[keys_name]).reshape(-1)
    if len(np.unique(keys)) != len(keys):  # the spec says the last wins, onnxruntime takes the first
        return "repeated keys are ambiguous"
    return None


def _mapping(keys: tuple[str, object], values: tuple[str, object], fallback: object
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sorted keys, their values, the value of a missing key) from the (name, value) of the keys_* and
    values_* attributes given."""
    keys = np.asarray(keys[1], dtype=_KEYS[keys[0]]).reshape(-1)
    values = np.asarray(values[1], dtype=_VALUES[values[0]]).reshape(-1)
    fallback = np.asarray(fallback, dtype=values.dtype if np.ndim(fallback) == 0 else None).reshape(-1)[:1]
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys for {len(values)} values")
    order = np.argsort(keys, kind="stable")
    return keys[order], values[order], fallback.astype(values.dtype)


@kernel("LabelEncoder", domain=ML, check=_check_label_encoder)
def label_encoder(ctx, x, *, default_float=-0.0, default_int64=-1, default_string="_Unused", default_tensor=None,
                  keys_int64s=None, keys_floats=None, keys_strings=None, keys_tensor=None, values_int64s=None,
                  values_floats=None, values_strings=None, values_tensor=None):
    values_given = one_given(_VALUES, (values_int64s, values_floats, values_strings, values_tensor))
    fallback = default_tensor if default_tensor is not None else {
        "values_int64s": default_int64, "values_floats": default_float, "values_strings": default_string,
        "values_tensor": 0}[values_given[0]]
    keys, values, fallback = _mapping(one_given(_KEYS, (keys_int64s, keys_floats, keys_strings, keys_tensor)),
                                      values_given, fallback)
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




_AGGREGATES = {0: "AVERAGE", 1: "SUM", 2: "MIN", 3: "MAX"}
#: BRANCH_LEQ, LT, GTE, GT, EQ, NEQ (6, BRANCH_MEMBER, is handled with the membership sets)
_COMPARISONS = {0: np.less_equal, 1: np.less, 2: np.greater_equal, 3: np.greater, 4: np.equal, 5: np.not_equal}


def _check_tree_ensemble(node, *, aggregate_function=1, nodes_modes, post_transform=0):
    if post_transform != 0:
        return f"post_transform {post_transform} is not implemented (only NONE)"
    if aggregate_function not in _AGGREGATES:
        return f"aggregate_function {aggregate_function} is not implemented"
    modes = np.asarray(nodes_modes, dtype=np.int64)
    if modes.size and (modes.min() < 0 or modes.max() > 6):
        return "unknown nodes_modes"
    return None


def _membership_sets(membership_values, modes: np.ndarray) -> np.ndarray:
    """[nodes, widest set] of each BRANCH_MEMBER node's members, NaN-padded."""
    values = np.asarray(membership_values if membership_values is not None else [], dtype=np.float64).reshape(-1)
    cuts = np.flatnonzero(np.isnan(values))
    sets = np.split(values, cuts)
    sets = [s[~np.isnan(s)] for s in sets][: int((modes == 6).sum())]
    table = np.full((len(modes), max((len(s) for s in sets), default=0)), np.nan)
    for row, members in zip(np.flatnonzero(modes == 6), sets):
        table[row, :len(members)] = members
    return table


@kernel("TreeEnsemble", domain=ML, dtypes=NUMERIC, check=_check_tree_ensemble)
def tree_ensemble(ctx, x, *, aggregate_function=1, leaf_targetids, leaf_weights, membership_values=None, n_targets=1,
                  nodes_falseleafs, nodes_falsenodeids, nodes_featureids, nodes_missing_value_tracks_true=None,
                  nodes_modes, nodes_splits, nodes_trueleafs, nodes_truenodeids, tree_roots):
    """All (sample, tree) pairs descend one level per step until every one sits on a leaf."""
    modes = np.asarray(nodes_modes, dtype=np.int64).reshape(-1)
    features = np.asarray(nodes_featureids, dtype=np.int64)
    splits = np.asarray(nodes_splits, dtype=np.float64).reshape(-1)
    true_ids, false_ids = np.asarray(nodes_truenodeids, np.int64), np.asarray(nodes_falsenodeids, np.int64)
    true_leaf = np.asarray(nodes_trueleafs, bool)
    false_leaf = np.asarray(nodes_falseleafs, bool)
    nan_true = np.asarray(nodes_missing_value_tracks_true or np.zeros(len(modes)), bool)
    members = _membership_sets(membership_values, modes)
    data = x.astype(np.float64)
    samples = np.arange(data.shape[0])[:, None]
    current = np.broadcast_to(np.asarray(tree_roots, np.int64), (data.shape[0], len(tree_roots))).copy()
    at_leaf = np.zeros(current.shape, bool)
    for _ in range(len(modes) + 1):
        active = ~at_leaf
        if not active.any():
            break
        node = np.where(active, current, 0)
        value = data[samples, features[node]]
        go_true = np.zeros(value.shape, bool)
        for mode, compare in _COMPARISONS.items():
            chosen = modes[node] == mode
            go_true |= chosen & compare(value, splits[node])
        if members.size:
            go_true |= (modes[node] == 6) & (value[..., None] == members[node]).any(axis=-1)
        go_true = np.where(np.isnan(value), nan_true[node], go_true)
        current = np.where(active, np.where(go_true, true_ids[node], false_ids[node]), current)
        at_leaf |= active & np.where(go_true, true_leaf[node], false_leaf[node])
    if not at_leaf.all():
        raise ValueError("the trees contain a cycle")
    weights = np.asarray(leaf_weights, dtype=np.float64).reshape(-1)[current]
    targets = np.asarray(leaf_targetids, np.int64)[current]
    rows = np.broadcast_to(samples, current.shape)
    aggregate = _AGGREGATES[aggregate_function]
    shape = (data.shape[0], n_targets)
    if aggregate in ("SUM", "AVERAGE"):
        out = np.zeros(shape)
        np.add.at(out, (rows, targets), weights)
        if aggregate == "AVERAGE":
            out /= current.shape[1]
    else:
        ufunc = np.minimum if aggregate == "MIN" else np.maximum
        out = np.full(shape, np.inf if aggregate == "MIN" else -np.inf)
        ufunc.at(out, (rows, targets), weights)
        out[np.isinf(out)] = 0.0
    return out.astype(x.dtype)
