"""LBANN weights objects ↔ numpy matrices (specs/lbann-format.md §6).

Every LBANN weights object is a Height × Width matrix whose shape its layer
decides. This module only moves such matrices in and out of initializers:

* ``value_initializer`` lists the matrix in column-major order;
* ``numpy_initializer`` names a ``.npy`` file: Width = 1 → any shape read flat
  in C order, Width > 1 → exactly (Height, Width) in C order;
* random initializers (LeNet-style files without trained weights) are sampled
  deterministically, seeded by the weights name, so imported models run.

Which ONNX array a matrix corresponds to (FC transpose, embedding tables …) is
the business of the op converters, not of this module.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...base.errors import FormatError, SecurityError, ShapeError
from ...base.fileio import check_numel, read_npy, resolve_inside

#: Above this many parameters the writer defaults to .npy files (spec §6.3).
NPY_THRESHOLD = 1_000_000


@dataclass(frozen=True)
class WeightSpec:
    """One weights slot of a layer: its matrix shape, fan-in/out and LBANN's default fill."""

    name: str
    height: int
    width: int
    fans: tuple[int, int] = (1, 1)
    default: str = "he_normal"  # he_normal | zeros | ones


def read_matrix(weights, spec: WeightSpec, base_dir: Path, where: str, *, any_path: bool = False) -> np.ndarray:
    """The (Height, Width) float32 matrix of a weights message (None: LBANN's default fill);
    ``any_path`` lets ``numpy_initializer`` name files outside the model's directory."""
    shape = (spec.height, spec.width)
    init = weights.initializer if weights is not None and weights.HasField("initializer") else None
    kind = init.WhichOneof("initializer_type") if init is not None else None
    what = f"{where}: weights '{spec.name}'"
    if kind not in ("value_initializer", "numpy_initializer"):  # made here, not read from a file
        _check_generated(spec, kind, what)
    if kind is None:
        return _random(spec.default, spec, shape)
    params = getattr(init, kind)
    if kind == "value_initializer":
        values = np.asarray(params.values if len(params.values) else params.values_d, dtype=np.float32)
        if values.size != spec.height * spec.width:
            raise FormatError(f"{what}: value_initializer holds {values.size} values; the layer needs "
                              f"{spec.height}×{spec.width} = {spec.height * spec.width}")
        return values.reshape(spec.width, spec.height).T.copy()
    if kind == "constant_initializer":
        return np.full(shape, params.value, dtype=np.float32)
    if kind == "numpy_initializer":
        array = load_npy(params.file, base_dir, what, any_path=any_path)
        if spec.width == 1:
            if array.size != spec.height:
                raise FormatError(f"{what}: '{params.file}' holds {array.size} values; the layer needs "
                                  f"{spec.height}")
            return array.astype(np.float32).reshape(shape)
        if array.shape != shape:
            raise FormatError(f"{what}: '{params.file}' has shape {list(array.shape)}; the layer needs "
                              f"exactly {list(shape)} (Height × Width)")
        return array.astype(np.float32)
    return _random(kind.removesuffix("_initializer"), spec, shape, params)


def _check_generated(spec: WeightSpec, kind: str | None, what: str) -> None:
    """A matrix nnbridge generates (a default, constant or random initializer) comes from a few
    bytes of text: it gets the budget of any constant a file expands to (the fold limit), checked
    before anything is allocated."""
    from ...passes.fold_constants import fold_limit_bytes

    check_numel((spec.height, spec.width), what)
    nbytes = spec.height * spec.width * 4
    if nbytes > fold_limit_bytes():
        raise ShapeError(f"{what}: the {kind or 'default'} initializer of a {spec.height}×{spec.width} matrix "
                         f"would generate {nbytes / 2**20:,.0f} MB, over the limit of "
                         f"{fold_limit_bytes() / 2**20:,.0f} MB for tensors a file expands to (set "
                         "NNBRIDGE_FOLD_LIMIT_MB higher to allow it)")


def _random(kind: str, spec: WeightSpec, shape: tuple[int, int], params=None) -> np.ndarray:
    if kind == "zeros":
        return np.zeros(shape, np.float32)
    if kind == "ones":
        return np.ones(shape, np.float32)
    rng = np.random.default_rng(zlib.crc32(spec.name.encode()))
    fan_in, fan_out = (max(f, 1) for f in spec.fans)
    if kind == "uniform":
        return rng.uniform(params.min, params.max, shape).astype(np.float32)
    if kind == "normal":
        return rng.normal(params.mean, params.standard_deviation, shape).astype(np.float32)
    scale = {"glorot": 2.0 / (fan_in + fan_out), "he": 2.0 / fan_in, "lecun": 1.0 / fan_in}[kind.split("_")[0]]
    if kind.endswith("_uniform"):
        limit = np.sqrt(3.0 * scale)
        return rng.uniform(-limit, limit, shape).astype(np.float32)
    return rng.normal(0.0, np.sqrt(scale), shape).astype(np.float32)


def load_npy(file: str, base_dir: Path, what: str, *, any_path: bool = False) -> np.ndarray:
    """A float .npy: no pickles, size checked first, and (unless ``any_path``, for trusted files)
    inside the model's directory — absolute paths included, as nnbridge writes them."""
    shown = f"{file[:60]}…" if len(file) > 60 else file
    if "\0" in file:
        raise FormatError(f"{what}: numpy file name '{shown}' contains a NUL byte")
    try:
        path = _npy_path(file, base_dir, what, any_path)
        if not path.is_file():
            raise FormatError(f"{what}: numpy file '{shown}' is missing")
        array = read_npy(path, f"{what}: '{shown}'")
    except OSError as exc:  # a name too long, no permission
        raise FormatError(f"{what}: numpy file '{shown}' cannot be read: {exc.strerror or exc}") from None
    if array.dtype not in (np.float32, np.float64):
        raise FormatError(f"{what}: '{file}' has dtype {array.dtype}; LBANN reads float32 or float64 only")
    if array.ndim > 1 and not array.flags.c_contiguous:
        raise FormatError(f"{what}: '{file}' is stored in Fortran order; LBANN requires C order")
    return array


def _npy_path(file: str, base_dir: Path, what: str, any_path: bool) -> Path:
    if any_path:
        return Path(file) if os.path.isabs(file) else Path(base_dir) / file
    relative = os.path.relpath(file, Path(base_dir).resolve()) if os.path.isabs(file) else file
    try:
        return resolve_inside(base_dir, relative, what)
    except SecurityError as exc:
        raise SecurityError(f"{exc} (for a file you trust: --lbann-trust-paths)") from None


def column_major(matrix: np.ndarray) -> np.ndarray:
    """The value_initializer list of a matrix."""
    return np.asarray(matrix, dtype=np.float32).flatten(order="F")
