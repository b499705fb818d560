"""TfIdfVectorizer: n-gram counts (with skips) of each input row, looked up in the
pool by a single integer key per n-gram, so counting is a vectorised scatter-add."""

from __future__ import annotations

import numpy as np

from ...ir import DType
from ..registry import kernel

_MODES = ("TF", "IDF", "TFIDF")


def _pool(pool_int64s, pool_strings) -> np.ndarray:
    if pool_strings is not None:
        return np.asarray(pool_strings, dtype=object)
    return np.asarray(pool_int64s if pool_int64s is not None else [], dtype=np.int64)


def _check_tfidf(node, *, max_gram_length, mode, pool_int64s=None, pool_strings=None):
    if mode not in _MODES:
        return f"mode {mode!r} is not implemented"
    if (pool_strings is None) == (pool_int64s is None):
        return "exactly one of pool_strings and pool_int64s is needed"
    vocabulary = len(np.unique(_pool(pool_int64s, pool_strings))) + 1
    if float(vocabulary) ** max(int(max_gram_length), 1) >= 2.0**62:
        return "the n-gram pool is too large for 64-bit n-gram keys"
    return None


def _pool_grams(pool: np.ndarray, ngram_counts, vocabulary: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """n → (sorted keys of the pool's n-grams, their n-gram numbers in pool order)."""
    starts = list(ngram_counts) + [len(pool)]
    ids = np.searchsorted(vocabulary, pool) + 1
    grams: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    number = 0
    for n, (begin, end) in enumerate(zip(starts[:-1], starts[1:]), start=1):
        tuples = ids[begin:end].reshape(-1, n)
        keys = _keys(tuples, len(vocabulary) + 1)
        order = np.argsort(keys, kind="stable")
        grams[n] = (keys[order], number + order)
        number += len(tuples)
    return grams


def _keys(tuples: np.ndarray, base: int) -> np.ndarray:
    """One integer per row of ids (base-``base`` digits); id 0 = not in the pool."""
    keys = np.zeros(tuples.shape[:-1], dtype=np.int64)
    for column in range(tuples.shape[-1]):
        keys = keys * base + tuples[..., column]
    return keys


@kernel("TfIdfVectorizer", dtypes={DType.STRING, DType.INT32, DType.INT64}, check=_check_tfidf)
def tfidf_vectorizer(ctx, x, *, max_gram_length, max_skip_count, min_gram_length, mode, ngram_counts, ngram_indexes,
                     pool_int64s=None, pool_strings=None, weights=None):
    pool = _pool(pool_int64s, pool_strings)
    vocabulary = np.unique(pool)
    indexes = np.asarray(ngram_indexes, dtype=np.int64)
    rows = x.reshape(1, -1) if x.ndim == 1 else x
    counts = np.zeros((rows.shape[0], int(indexes.max()) + 1 if indexes.size else 0), dtype=np.float32)
    slot = np.clip(np.searchsorted(vocabulary, rows), 0, max(len(vocabulary) - 1, 0))
    ids = np.where(vocabulary[slot] == rows, slot + 1, 0) if len(vocabulary) else np.zeros(rows.shape, np.int64)
    grams = _pool_grams(pool, ngram_counts, vocabulary)
    low, high = min_gram_length, max_gram_length
    for n in range(low, high + 1):
        if n not in grams or not grams[n][0].size:
            continue
        pool_keys, numbers = grams[n]
        for skip in range(max_skip_count + 1 if n > 1 else 1):  # unigrams have no skips
            span = (n - 1) * (skip + 1)
            if span >= rows.shape[1]:
                break
            starts = np.arange(rows.shape[1] - span)
            tuples = ids[:, starts[:, None] + np.arange(n) * (skip + 1)]  # [rows, grams, n]
            keys = _keys(tuples, len(vocabulary) + 1)
            at = np.clip(np.searchsorted(pool_keys, keys), 0, len(pool_keys) - 1)
            hit = (pool_keys[at] == keys) & (tuples > 0).all(axis=-1)
            row_of = np.broadcast_to(np.arange(rows.shape[0])[:, None], keys.shape)
            np.add.at(counts, (row_of[hit], indexes[numbers[at[hit]]]), 1.0)
    if mode != "TF":
        scale = np.ones(counts.shape[1], np.float32)
        if weights is not None:
            scale[indexes] = np.asarray(weights, dtype=np.float32)
        counts = (np.minimum(counts, 1.0) if mode == "IDF" else counts) * scale
    return counts.reshape(-1) if x.ndim == 1 else counts
