"""IR ``Graph`` → LBANN Era C prototext (+ ``.npy`` weights), written atomically.

Steps: fold constant sub-expressions and make shapes static (the shared ``fold`` and
``infer-shapes`` passes), map
every node with the registered exporters (``export_nn``, ``export_tensor``) —
collecting *all* nodes LBANN cannot express into one error — then emit
``trainer { mini_batch_size }``, ``model { layer … weights … }`` and the default
``optimizer { no_optimizer {} }`` (specs/lbann-format.md §3.1), printed the way
LBANN's own Python frontend prints (field-number order).

Trained weights travel inline (``value_initializer``, column-major) or as one
``.npy`` per weights object in ``<stem>_weights/`` beside the prototext
(``numpy_initializer``); by default inline up to 1 M parameters.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ...base.errors import FormatError, InputError, Unsupported, UnsupportedOpError
from ...base.fileio import atomic_outputs
from ...ir import Graph, Node
from ...ir.decompositions import LAYER_NORM_START_DIM, Target
from ...passes import run_passes
from ...passes.decompose import decompose
from ...passes.fold_constants import oversized_constant
from ...protos.lbann import lbann_pb2
from . import experiment, export_nn, export_tensor, textio  # noqa: F401 - register the exporters
from .exporting import EXPORTERS, ExportContext, Inexpressible, WeightsEntry
from .mapping import LBANN_VERSIONS
from .weights import NPY_THRESHOLD, column_major

DEFAULT_VERSION = "0.104"
#: the data fields LBANN's stock data readers provide, given to the graph inputs in order
STOCK_FIELDS = ("samples", "labels", "responses")
#: inline weights above this many values make text files LBANN and nnbridge read back slowly or
#: not at all (VGG-19: 4.2 GB); such weights go to .npy files
INLINE_LIMIT = 1 << 24


def graph_to_lbann(graph: Graph, version: str = DEFAULT_VERSION
                   ) -> tuple[lbann_pb2.LbannPB, list[WeightsEntry], textio.Header]:
    """The LbannPB message (weights not yet attached), the weights, and the header metadata."""
    if version not in LBANN_VERSIONS:
        raise InputError(f"unknown LBANN version '{version}'; choose from {', '.join(LBANN_VERSIONS)}")
    graph, _ = prepared(graph, {"lbann_version": version})
    batch = _batch(graph)
    ctx = ExportContext(graph, version, batch)
    header = textio.Header()
    _input_layers(ctx, graph, header)
    bad: list[Unsupported] = []
    for node in graph.nodes:  # every node, so that all the reasons come at once
        if id(node) not in ctx.absorbed and (problem := _export_node(ctx, node)) is not None:
            bad.append(problem)
    if bad:
        raise UnsupportedOpError(f"LBANN {version} (Era C)", bad)
    for value in graph.outputs:
        name = ctx.layer_of.get(id(value))
        if name is None or any(layer.name == name and layer.WhichOneof("layer_type") == "input"
                               for layer in ctx.layers):
            name = ctx.layer(f"{value.name}_output", [ctx.parent(value)], "identity")[0].name
        header.outputs.append(name)
    message = lbann_pb2.LbannPB()
    message.model.name = graph.name
    message.model.layer.extend(ctx.layers)
    message.optimizer.no_optimizer.SetInParent()
    message.trainer.mini_batch_size = batch if isinstance(batch, int) else 1
    return message, ctx.weights, header


def _input_layers(ctx: ExportContext, graph: Graph, header: textio.Header) -> None:
    """An input layer per graph input, reading the stock data fields in order; their per-sample
    dims and dtypes go to the header."""
    for i, value in enumerate(graph.inputs):
        try:
            dims = ctx.sample(value)
        except Inexpressible as exc:
            raise FormatError(f"graph input {exc}") from None
        layer, params = ctx.layer(value.name, [], "input", value)
        params.data_field = STOCK_FIELDS[i] if i < len(STOCK_FIELDS) else layer.name
        header.inputs[layer.name] = (dims, value.type.dtype.short if value.type.dtype else "float32")


def _export_node(ctx: ExportContext, node: Node) -> Unsupported | None:
    """``node`` as LBANN layers, or why it cannot be (its outputs are then bound to a placeholder,
    so the export goes on without cascading errors downstream)."""
    fn = EXPORTERS.get(f"{node.domain}.{node.op}" if node.domain else node.op)
    try:
        if fn is None:
            raise Inexpressible(oversized_constant(node) or "LBANN has no equivalent layer or operator")
        ints = [o.name for o in node.outputs[:1] if o.type.dtype is not None and not o.type.dtype.is_float
                and node.op not in export_tensor.COMPARISONS]  # those map when cast to float
        if ints:
            raise Inexpressible(f"'{ints[0]}' is {node.outputs[0].type.dtype.short}; LBANN layers compute "
                                f"in floating point")
        fn(ctx, node)
    except Inexpressible as exc:
        for out in node.outputs:
            ctx.bind(out, f"<{node.name}>")
        return Unsupported(node.op, node.name, str(exc), node.domain)
    return None


#: LBANN has no shape arithmetic and takes trained weights only as weights objects: everything
#: computable from constants is folded, and every shape must be static (specs/lbann-format.md §8)
PREPARE_PASSES = ["fold", "infer-shapes"]


def prepared(graph: Graph, options: Mapping[str, Any]) -> tuple[Graph, Counter]:
    """A folded copy with inferred shapes, rewritten into what the LBANN version of ``options``
    expresses (the caller's graph is never changed), and the rewrites per op."""
    version = options.get("lbann_version") or DEFAULT_VERSION
    develop = version in LBANN_VERSIONS and LBANN_VERSIONS.index(version) >= LBANN_VERSIONS.index("develop")
    graph = graph.copy()
    run_passes(graph, PREPARE_PASSES)
    return graph, decompose(graph, Target("lbann", frozenset({LAYER_NORM_START_DIM} if develop else ())))


def _batch(graph: Graph) -> int | str:
    if not graph.inputs:
        raise FormatError(f"graph '{graph.name}' has no inputs; an LBANN model starts at input layers")
    firsts = {v.type.shape[0] if v.type.shape else None for v in graph.inputs}
    if len(firsts) != 1 or None in firsts:
        raise FormatError(f"graph '{graph.name}': inputs must share a known leading batch dimension, got "
                          f"{[list(v.type.shape or []) for v in graph.inputs]}")
    return firsts.pop()


_FILE_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def save_prototext(graph: Graph, path: str | os.PathLike, *, lbann_weights: str | None = None,
                   lbann_version: str = DEFAULT_VERSION, lbann_npy_paths: str = "absolute",
                   lbann_train: bool | str | Mapping[str, Any] | None = None, **_options) -> Path:
    """Write ``graph`` as an LBANN prototext; weights ``inline``, ``npy`` or by size (None).
    ``.npy`` paths are absolute by default: LBANN resolves relative ones against its working
    directory, not the prototext's. ``lbann_train`` (True, a mapping or ``KEY=VALUE,…`` text of
    ``experiment.TRAIN_DEFAULTS``) writes an experiment that trains the model: loss, objective,
    metric, optimizer, trainer, weights trainable unless ``freeze``."""
    path = Path(path)
    freeze, data_file, arrays = False, path.with_name(f"{path.stem}_data.npz"), None
    if lbann_train not in (None, False):
        settings = experiment.train_settings(lbann_train)
        freeze = settings["freeze"]
        graph = graph.copy()
        arrays = experiment.set_up_training(graph, settings, f"'{graph.name}'", str(data_file))
    if lbann_weights not in (None, "inline", "npy"):
        raise InputError(f"lbann_weights must be 'inline' or 'npy', not '{lbann_weights}'")
    if lbann_npy_paths not in ("relative", "absolute"):
        raise InputError(f"lbann_npy_paths must be 'relative' or 'absolute', not '{lbann_npy_paths}'")
    message, entries, header = graph_to_lbann(graph, lbann_version)
    total = sum(e.matrix.size for e in entries)
    if lbann_weights == "inline" and total > INLINE_LIMIT:
        raise InputError(f"inline weights: {total:,} values would make a text file of about {total * 14 / 2**30:.1f} "
                         f"GiB that LBANN and nnbridge read back slowly or not at all; above {INLINE_LIMIT:,} "
                         f"values write them as .npy (--lbann-weights npy, the default at this size)")
    mode = lbann_weights or ("npy" if total > NPY_THRESHOLD else "inline")
    files: list[tuple[Path, np.ndarray]] = []
    used: set[str] = set()
    inline: list[np.ndarray] = []
    for entry in entries:
        w = message.model.weights.add(name=entry.name)
        if entry.frozen or freeze:
            w.optimizer.no_optimizer.SetInParent()
        if mode == "inline":
            w.initializer.value_initializer.SetInParent()
            inline.append(column_major(entry.matrix))
            continue
        stem = _FILE_SAFE.sub("_", entry.name)
        while stem in used:
            stem += "_"
        used.add(stem)
        relative = f"{weights_dir(path).name}/{stem}.npy"
        target = path.parent / relative
        w.initializer.numpy_initializer.file = str(target.resolve()) if lbann_npy_paths == "absolute" else relative
        files.append((target, entry.npy))
    experiment.restore(message, graph)
    text = textio.format_header(lbann_version, header) + textio.to_text(message, inline)
    data = [data_file] if arrays is not None else []  # the --lbann-train data the experiment's reader reads
    with atomic_outputs([path, *data, *(f for f, _ in files)]) as temps:
        temps[0].write_text(text, encoding="utf-8")
        if data:
            with open(temps[1], "wb") as fh:
                np.savez(fh, **arrays)
        for tmp, (_, array) in zip(temps[1 + len(data):], files):
            with open(tmp, "wb") as fh:
                write_npy(fh, array)
    return path


#: bytes of a weights array laid out (transposed, cast) at a time while it is written
NPY_BLOCK_BYTES = 16 << 20


def write_npy(fh, array: np.ndarray) -> None:
    """``array`` as a C-order float32 ``.npy`` (what LBANN's reader takes), laid out block by
    block: a transposed view of a 400 MB matrix never exists as a whole second copy."""
    np.lib.format.write_array_header_1_0(fh, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
                                              "fortran_order": False, "shape": array.shape})
    rows = array.reshape(array.shape[0], -1) if array.ndim > 1 else array.reshape(-1, 1)
    step = max(1, NPY_BLOCK_BYTES // max(1, rows.shape[1] * 4))
    for start in range(0, rows.shape[0], step):
        fh.write(np.ascontiguousarray(rows[start:start + step], dtype=np.float32).data)


def weights_dir(path: Path) -> Path:
    """Where ``npy`` weights of the prototext ``path`` go: ``<stem>_weights/`` beside it."""
    return path.with_name(f"{path.stem}_weights")


def notes(path: Path) -> list[str]:
    """What a user of the written file must know about running it on LBANN."""
    with open(path, encoding="utf-8") as fh:
        return text_notes(fh)


def text_notes(lines) -> list[str]:
    """The notes of a prototext given as lines (a file or a string's lines)."""
    permutes = sum(1 for line in lines if line.strip() == "permute {")
    if not permutes:
        return []
    return [f"{permutes} permute layer{'s' if permutes > 1 else ''} (transposes): LBANN builds permute only with "
            f"GPUs and cuTENSOR; a CPU build refuses this file"]


def written_files(path: Path) -> list[Path]:
    folder = weights_dir(path)
    return [path, *(sorted(folder.glob("*.npy")) if folder.is_dir() else [])]
