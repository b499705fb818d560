"""Deterministic example inputs generated from a graph's declared inputs, and what they were.

Floats are N(0, 1), booleans fair coins, integers small non-negative values — except
integers that index something (Gather/GatherElements/GatherND/Scatter indices, OneHot
positions, possibly through casts and reshapes), which are drawn from the valid index
range so that an embedding lookup reads real rows. ``ranges`` replaces any of these by a
uniform draw in [lo, hi). Every generated or given input is described by an
``InputInfo`` so that a result can be reasoned about and reproduced.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..base.errors import InputError, UsageError
from ..base.fileio import atomic_outputs, check_numel
from ..ir import DType, Flag, Graph, Node, PatternKind, TypeKind, Value, op_traits, pattern_kind
from ..ir.feeds import match_inputs, model_inputs
from ..ir.topology import walk_readers

#: integers that are not indices are drawn from [0, SMALL_INT)
SMALL_INT = 10


@dataclass(kw_only=True)
class InputInfo:
    """How one input was made: enough to reason about a result and to draw it again."""

    name: str
    shape: list[int]
    dtype: str
    distribution: str
    seed: int | None
    min: float | None
    max: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def concrete_shape(shape, dims: Mapping[str, int]) -> tuple[int, ...] | None:
    """``shape`` with its symbols taken from ``dims``; None while any dim stays unknown."""
    if shape is None:
        return None
    out = tuple(d if isinstance(d, int) else dims.get(d) if isinstance(d, str) else None for d in shape)
    return None if any(d is None for d in out) else tuple(int(d) for d in out)


def _unpinned(graph: Graph, dims: Mapping[str, int], given: Mapping[str, Any]) -> None:
    """One error naming every input whose shape is still unknown, and the flags that pin them all."""
    from ..passes.pin_shapes import describe_dynamic, pinning_hint

    missing = [v for v in graph.inputs if v.name not in given and v.type.kind is TypeKind.TENSOR
               and concrete_shape(v.type.shape, dims) is None]
    if missing:
        raise InputError(f"dynamic input dims: {describe_dynamic(missing)}; pin them with "
                         f"{pinning_hint(missing, dims)} (or pass the inputs with --input)")


def random_inputs(graph: Graph, seed: int | None = None, dims: Mapping[str, int] | None = None,
                  given: Mapping[str, np.ndarray] | None = None,
                  ranges: Mapping[str, tuple[float, float]] | None = None) -> dict[str, np.ndarray]:
    """Values for every graph input not in ``given`` (see the module docstring)."""
    return generate_inputs(graph, seed, dims, given, ranges)[0]


def refuse_unread_seed(graph: Graph, seed: int | None, given: Mapping[str, Any]) -> None:
    """A seed draws only the inputs that have no value: one given (not None) when every input has
    one would change nothing, and is refused. A given name the model does not take is left to
    ``match_inputs`` to name."""
    declared = [v.name for v in graph.inputs]
    if seed is None or set(given) - set(declared) or any(name not in given for name in declared):
        return
    held = f"every input of the model already has a value ({', '.join(declared)})" if declared else \
        "the model takes no inputs"
    raise UsageError(f"--seed {seed}: not read, as {held}; the seed draws only inputs that have none")


def generate_inputs(graph: Graph, seed: int | None = None, dims: Mapping[str, int] | None = None,
                    given: Mapping[str, np.ndarray] | None = None,
                    ranges: Mapping[str, tuple[float, float]] | None = None,
                    sources: Mapping[str, str] | None = None) -> tuple[dict[str, np.ndarray], list[InputInfo]]:
    """Feeds for every graph input plus one ``InputInfo`` each; ``sources`` says where given ones
    came from. ``seed`` None draws with seed 0 (a seed given when nothing is drawn is refused)."""
    dims, ranges, sources = dims or {}, dict(ranges or {}), sources or {}
    match_inputs(graph, given or {})
    refuse_unread_seed(graph, seed, given or {})
    seed = 0 if seed is None else seed
    rng = np.random.default_rng(seed)
    for name in ranges:
        if name not in {v.name for v in graph.inputs}:
            raise UsageError(f"--input-range '{name}': the model has no input named so; {model_inputs(graph)}")
    indices = index_ranges(graph)
    _unpinned(graph, dims, given or {})
    feeds, infos = {}, []
    for v in graph.inputs:
        if given and v.name in given:
            feeds[v.name] = given[v.name]
            infos.append(describe(v.name, given[v.name], sources.get(v.name, "given"), None))
            continue
        if v.type.kind is not TypeKind.TENSOR:
            raise InputError(f"input '{v.name}' is a {v.type.kind.value}; pass it explicitly")
        shape = concrete_shape(v.type.shape, dims)
        assert shape is not None  # _unpinned said otherwise
        check_numel(shape, f"input '{v.name}'")
        dtype = v.type.dtype or DType.FLOAT32
        value, how = _draw(rng, v.name, shape, dtype, ranges.get(v.name), indices.get(v.name))
        feeds[v.name] = value
        infos.append(describe(v.name, value, how, seed))
    return feeds, infos


def calls_per_batch(graph: Graph, batch: int) -> int:
    """How many calls make up one compiled batch: a graph whose inputs all take a fixed leading dim
    L that divides the batch runs batch / L times (SambaFlow feeds a batch-1 model sample by sample)."""
    leading = {v.type.shape[0] for v in graph.inputs if v.type.shape}
    if len(leading) == 1:
        (size,) = leading
        if isinstance(size, int) and 0 < size < batch and batch % size == 0:
            return batch // size
    return 1


def batch_inputs(graph: Graph, batch: int, seed: int | None = None, dims: Mapping[str, int] | None = None,
                 inputs: Mapping[str, np.ndarray] | None = None,
                 ranges: Mapping[str, tuple[float, float]] | None = None
                 ) -> tuple[dict[str, np.ndarray], list[InputInfo], list[dict[str, np.ndarray]]]:
    """A compiled batch's inputs, their descriptions and the per-call slices
    (:func:`calls_per_batch`). A symbolic leading dim takes the batch unless ``dims`` says
    otherwise. Generated inputs draw call k with seed + k; given inputs hold the whole batch (or
    one call's worth)."""
    leading = {v.type.shape[0] for v in graph.inputs if v.type.shape}
    dims = {**{d: batch for d in leading if isinstance(d, str)}, **(dims or {})}
    calls = calls_per_batch(graph, batch)
    given = dict(inputs or {})
    width = batch // calls  # the graph's own leading dim when it runs call by call
    if calls == 1 or any(np.shape(a)[:1] != (batch,) for a in given.values()):
        feeds, infos = generate_inputs(graph, seed, dims, given, ranges)
        return feeds, infos, [feeds]
    refuse_unread_seed(graph, seed, given)
    drawn = any(v.name not in given for v in graph.inputs)
    seed = 0 if seed is None else seed
    per_call, first = [], []
    for k in range(calls):
        part = {name: np.asarray(a)[k * width:(k + 1) * width] for name, a in given.items()}
        call_feeds, call_infos = generate_inputs(graph, seed + k if drawn else None, dims, part, ranges)
        per_call.append(call_feeds)
        first = first or call_infos
    feeds = {name: np.concatenate([f[name] for f in per_call]) for name in per_call[0]}
    infos = [describe(i.name, feeds[i.name], i.distribution if i.name in given else
                      f"{i.distribution}, call k of {calls} drawn with seed {seed}+k", i.seed) for i in first]
    return feeds, infos, per_call


def joined(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-call outputs joined along the batch axis."""
    if len(runs) == 1:
        return runs[0]
    return {name: np.concatenate([r[name] for r in runs]) for name in runs[0]}


def _draw(rng: np.random.Generator, name: str, shape: tuple[int, ...], dtype: DType,
          span: tuple[float, float] | None, index: tuple[int, str] | None) -> tuple[np.ndarray, str]:
    if span is not None:
        lo, hi = span
        if not lo < hi:
            raise InputError(f"--input-range {name}={lo:g}:{hi:g}: LO must be below HI")
    if dtype.is_float:
        if span is None:
            return rng.standard_normal(shape).astype(dtype.numpy), "normal(0, 1)"
        return rng.uniform(lo, hi, shape).astype(dtype.numpy), f"uniform[{lo:g}, {hi:g})"
    if dtype is DType.BOOL:
        if span is not None:
            raise InputError(f"--input-range {name}: the input is boolean; give it with --input instead")
        return rng.random(shape) < 0.5, "bernoulli(0.5)"
    if dtype.is_int:
        info = np.iinfo(dtype.numpy)
        if span is not None:
            if lo != int(lo) or hi != int(hi):
                raise InputError(f"--input-range {name}={lo:g}:{hi:g}: the input is {dtype.short}; use integers")
            low, high, why = int(lo), int(hi), ""
        elif index is not None:
            low, high, why = 0, index[0], f" (indices into {index[1]})"
        else:
            low, high, why = 0, SMALL_INT, ""
        low, high = max(low, int(info.min)), min(high, int(info.max) + 1)
        return rng.integers(low, high, shape).astype(dtype.numpy), f"integers [{low}, {high}){why}"
    raise InputError(f"input '{name}' has dtype {dtype.short}; pass it explicitly")


def describe(name: str, value: Any, distribution: str, seed: int | None) -> InputInfo:
    arr = np.asarray(value)
    lo = hi = None
    if arr.size and arr.dtype.kind in "biuf":
        lo, hi = float(np.min(arr)), float(np.max(arr))
    elif arr.size and arr.dtype.kind == "V":  # bfloat16 and other ml_dtypes
        wide = arr.astype(np.float32)
        lo, hi = float(np.min(wide)), float(np.max(wide))
    return InputInfo(name=name, shape=list(arr.shape), dtype=str(arr.dtype), distribution=distribution, seed=seed,
                     min=lo, max=hi)


def index_ranges(graph: Graph) -> dict[str, tuple[int, str]]:
    """Integer graph inputs that index a tensor → (exclusive upper bound, what they index)."""
    found: dict[str, tuple[int, str]] = {}
    for v in graph.inputs:
        if v.type.dtype is None or not v.type.dtype.is_int:
            continue
        for node, value in walk_readers(graph, v, _passes_indices_on):
            bound = _index_bound(node, [i for i, x in enumerate(node.inputs) if x is value])
            if bound is not None and (v.name not in found or bound < found[v.name][0]):
                found[v.name] = (bound, f"{node.op} '{node.name}'")
    return found


def _passes_indices_on(node: Node, value: Value) -> bool:
    """Whether ``node``'s outputs hold ``value``'s integers (moved, not computed): it reads
    ``value`` as its data input and keeps integers or only rearranges elements."""
    return node.input(0) is value and (Flag.KEEPS_INTS in op_traits(node.op, node.domain).flags
                                       or pattern_kind(node.op, node.domain) is PatternKind.INJECTIVE)


def _index_bound(node: Node, slots: list[int]) -> int | None:
    """The number of valid positions when slot(s) ``slots`` of ``node`` hold indices, if static."""
    if node.op == "OneHot" and 0 in slots and node.inputs[1] is not None:
        depth = node.inputs[1].const
        return int(np.asarray(depth).reshape(-1)[0]) if depth is not None and np.asarray(depth).size else None
    if node.op not in ("Gather", "GatherElements", "GatherND", "ScatterElements", "ScatterND") or 1 not in slots:
        return None
    shape = node.inputs[0].type.shape if node.inputs[0] is not None else None
    if not shape:
        return None
    if node.op == "GatherND" or node.op == "ScatterND":
        return _nd_bound(shape, int(node.attr("batch_dims", 0) or 0))
    return _axis_bound(shape, int(node.attr("axis", 0) or 0))


def _nd_bound(shape: list, batch: int) -> int | None:
    """The bound of a GatherND/ScatterND index: the smallest dimension past the batch ones, when
    all of them are static."""
    sizes = [d for d in shape[batch:] if isinstance(d, int)]
    return min(sizes) if sizes and len(sizes) == len(shape[batch:]) else None


def _axis_bound(shape: list, axis: int) -> int | None:
    """The bound of an index along ``axis`` (negative counts from the end): that dimension, if static."""
    axis = axis + len(shape) if axis < 0 else axis
    size = shape[axis] if 0 <= axis < len(shape) else None
    return size if isinstance(size, int) and size > 0 else None


def npy_name(name: str) -> str:
    """A file name for a tensor name (no directories, no leading dots)."""
    return (name.replace("/", "_").replace("\\", "_").replace(":", "_").lstrip(".") or "tensor") + ".npy"


def npy_names(names: Iterable[str], what: str) -> dict[str, str]:
    """``npy_name`` of each tensor name; two names that would share one file (``a/b`` and ``a_b``)
    are refused in one line naming both, so that no file ever overwrites another."""
    files: dict[str, str] = {}
    owner: dict[str, str] = {}
    for name in names:
        file = npy_name(name)
        if file in owner:
            raise InputError(f"{what}s '{owner[file]}' and '{name}' would both be written as {file}, one over the "
                             f"other; nothing was written")
        files[name], owner[file] = file, name
    return files


def save_inputs(feeds: Mapping[str, Any], directory: str | os.PathLike) -> dict[str, Path]:
    """Write each input as ``<name>.npy`` in ``directory`` (never pickled); name → path. Every input
    is checked before the first file is written, and the files appear together or not at all."""
    out = Path(directory)
    files = npy_names(feeds, "input")
    arrays = {name: np.asarray(value) for name, value in feeds.items()}
    for name, arr in arrays.items():
        if arr.dtype.hasobject:
            raise InputError(f"input '{name}' holds Python objects; it cannot be saved as .npy")
    paths = {name: out / files[name] for name in arrays}
    with atomic_outputs(list(paths.values())) as temps:
        for tmp, arr in zip(temps, arrays.values()):
            with open(tmp, "wb") as fh:
                np.save(fh, arr, allow_pickle=False)
    return paths
