"""LBANN prototext (+ its .npy files) → IR ``Graph``.

Order of work: strict parse with era detection (``textio``), Era A upgraded to
Era C (``legacy``), then the layer graph is checked (unique names, known parents,
no cycles) and walked in topological order; one importer per layer type
(``import_ops``) emits IR nodes. Training-only layers (losses, metrics) and what
depends on them are dropped; layers without children become graph outputs.

Shapes: LBANN tensors never include the mini-batch dimension and files do not
store input shapes. ``input_shapes`` gives each needed input layer's *per-sample*
dims (``image=1x28x28``: C×H×W); the IR prepends a batch dim equal to the
trainer's ``mini_batch_size`` (1 when unset) unless ``batch_size`` says otherwise.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...base.errors import FormatError, InputError, ShapeError, Unsupported, UnsupportedOpError
from ...base.fileio import check_numel
from ...ir import DType, Graph
from ...protos.lbann import lbann_pb2
from . import experiment, import_misc, legacy, textio  # noqa: F401 - import_misc registers importers
from .import_context import ImportContext, Tensor, UsedFields
from .import_ops import IMPORTERS
from .mapping import NO_EFFECT, TRAINING_ONLY


def read_prototext(path: str | os.PathLike, *, input_shapes: Mapping[str, Sequence[int]] | None = None,
                   batch_size: int | None = None, training_layers: bool = False, trust_paths: bool = False,
                   slice_points: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """Load an LBANN ``.prototext`` (Era C, or legacy Era A) into the IR; ``training_layers``
    imports the loss and metric layers (and the labels feeding them) as graph nodes too;
    ``trust_paths`` lets weights files lie outside the model's directory; ``slice_points`` are
    the data reader's (``independent``/``dependent`` → points) for layers that ask the reader."""
    path = Path(path)
    text = textio.read_text(path)
    message, era = textio.parse(text, str(path))
    if era == textio.ERA_A:
        message = legacy.upgrade(message, str(path), slice_points)
    return build_graph(message, source=str(path), base_dir=path.parent, input_shapes=input_shapes,
                       batch_size=batch_size, header=textio.parse_header(text, str(path)), name=path.stem,
                       training_layers=training_layers, trust_paths=trust_paths, slice_points=slice_points)


def build_graph(pb: lbann_pb2.LbannPB, *, source: str = "<lbann>", base_dir: Path | None = None,
                input_shapes: Mapping[str, Sequence[int]] | None = None, batch_size: int | None = None,
                header: textio.Header | None = None, name: str = "lbann", training_layers: bool = False,
                trust_paths: bool = False, slice_points: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """An Era C ``LbannPB`` message → IR graph (also used by ``nnbridge.lbann``)."""
    header = header or textio.Header()
    layers = list(pb.model.layer)
    by_name = _check_names(layers, source)
    children = _children(layers)
    order = _topological(layers, by_name, source)
    dropped = set() if training_layers else _dropped(order, children, by_name)
    kept = [layer for layer in order if layer.name not in dropped]
    shapes = _input_shapes(layers, kept, header, input_shapes, source)
    _refuse_unimportable(kept, source)

    batch = int(batch_size or pb.trainer.mini_batch_size or 1)
    graph = Graph(pb.model.name or name)
    for layer in layers:
        graph.reserve_name(layer.name)
    ctx = ImportContext(graph, batch, {w.name: w for w in pb.model.weights}, base_dir or Path.cwd(), source,
                        any_path=trust_paths, slice_points=slice_points)
    outputs = _import_layers(ctx, kept, children, shapes)
    _set_outputs(graph, kept, children, outputs, header, dropped)
    graph.metadata["lbann_mini_batch_size"] = str(batch)
    experiment.keep(graph, pb, dropped)
    return graph


def _input_shapes(layers, kept, header: textio.Header, given: Mapping[str, Sequence[int]] | None,
                  source: str) -> dict[str, tuple[tuple[int, ...], str]]:
    """Each input layer's per-sample dims and dtype: the file's header, then ``--input-shape``
    (by layer name or by LBANN's data field, e.g. ``samples``); every kept input must have one."""
    shapes = {n: (tuple(d), t) for n, (d, t) in header.inputs.items()}
    all_inputs = [layer.name for layer in layers if layer.WhichOneof("layer_type") == "input"]
    by_field: dict[str, list[str]] = {}  # LBANN's own name for what an input layer reads: its data field
    for layer in layers:
        if layer.WhichOneof("layer_type") == "input" and layer.input.data_field:
            by_field.setdefault(layer.input.data_field, []).append(layer.name)
    for key, dims in (given or {}).items():
        named = [key] if key in all_inputs else by_field.get(key)
        if not named:
            fields = f" (data fields {', '.join(by_field)})" if by_field else ""
            raise InputError(f"{source}: --input-shape names '{key}', but the model's input layers are "
                             f"{', '.join(all_inputs) or '(none)'}{fields}")
        for name in named:
            shapes[name] = (tuple(int(d) for d in dims), shapes.get(name, ((), "float32"))[1])
    missing = [layer.name for layer in kept if layer.WhichOneof("layer_type") == "input" and layer.name not in shapes]
    if missing:
        raise ShapeError(f"{source}: LBANN files do not store input shapes; give the per-sample shape "
                         f"(without the batch dim) of {', '.join(missing)}, e.g. --input-shape "
                         f"{missing[0]}=1x28x28")
    return shapes


def _refuse_unimportable(kept, source: str) -> None:
    """Every kept layer whose type has no importer, all in one error."""
    bad = [Unsupported(layer.WhichOneof("layer_type") or "?", layer.name,
                       "no layer type set" if layer.WhichOneof("layer_type") is None else
                       "no ONNX equivalent in nnbridge")
           for layer in kept if layer.WhichOneof("layer_type") not in {*IMPORTERS, "input"}]
    if bad:
        raise UnsupportedOpError(f"LBANN import of {source}", bad)


def _import_layers(ctx: ImportContext, kept, children, shapes) -> dict[str, list[Tensor]]:
    """Each kept layer through its importer, in order; a field set but not read refuses the file
    (every such field, in one error)."""
    graph, batch, source = ctx.graph, ctx.batch, ctx.source
    input_names = [layer.name for layer in kept if layer.WhichOneof("layer_type") == "input"]
    outputs: dict[str, list[Tensor]] = {}
    ignored: list[Unsupported] = []
    for layer in kept:
        ctx.layer = layer
        kind = layer.WhichOneof("layer_type")
        if kind == "input":
            dims, dtype = shapes[layer.name]
            check_numel([batch, *dims], f"{source}: input layer '{layer.name}' at mini-batch size {batch}")
            value = graph.add_input(layer.name, ctx.type_of(dims, _input_dtype(dtype)))
            outputs[layer.name] = [Tensor(value, tuple(dims))]
            continue
        inputs = [_parent_output(layer, p, outputs, children, source) for p in layer.parents]
        ctx.imported[layer.name] = (layer, inputs)
        ctx.hint = _hint_dims(layer, outputs, source)
        params = UsedFields(getattr(layer, kind))
        try:
            outputs[layer.name] = ctx.follow_hint(IMPORTERS[kind](ctx, layer, params, inputs))
        except ShapeError as exc:
            given = ", ".join(f"{n}={'x'.join(map(str, shapes[n][0]))}" for n in input_names)
            raise ShapeError(f"{exc} (input shapes: {given}; per sample, without the batch dim)") from None
        ignored += [Unsupported(kind, layer.name, f"sets '{field}', which nnbridge does not read")
                    for field in params.unread() if field not in NO_EFFECT.get(kind, ())]
    if ignored:
        raise UnsupportedOpError(f"LBANN import of {source}", ignored)
    return outputs


def _input_dtype(name: str) -> DType:
    """LBANN layers compute in float32; only integer inputs (embedding indices) keep their type."""
    dtype = DType.__members__.get(name.upper(), DType.FLOAT32)
    return dtype if dtype.is_int else DType.FLOAT32


def _check_names(layers, source: str) -> dict[str, Any]:
    by_name: dict[str, Any] = {}
    for layer in layers:
        if not layer.name or any(c.isspace() for c in layer.name):
            raise FormatError(f"{source}: layer name '{layer.name}' is empty or contains whitespace")
        if layer.name in by_name:
            raise FormatError(f"{source}: two layers are named '{layer.name}'")
        by_name[layer.name] = layer
    for layer in layers:
        for parent in layer.parents:
            if parent not in by_name:
                hint = " (space-separated lists are Era A/B syntax; Era C lists one parent per line)" \
                    if any(c.isspace() for c in parent) else ""
                raise FormatError(f"{source}: layer '{layer.name}' lists parent '{parent}', which does not "
                                  f"exist{hint}")
        if layer.hint_layer and layer.hint_layer not in by_name:
            raise FormatError(f"{source}: layer '{layer.name}' names hint_layer '{layer.hint_layer}', "
                              f"which does not exist")
    return by_name


def _children(layers) -> dict[str, list[str]]:
    """Children in LBANN's order: the explicit ``children`` list, else file order of the users."""
    found: dict[str, list[str]] = {layer.name: [] for layer in layers}
    for layer in layers:
        for parent in layer.parents:
            if layer.name not in found[parent]:
                found[parent].append(layer.name)
    for layer in layers:
        if layer.children:
            found[layer.name] = list(layer.children)
    return found


def _topological(layers, by_name, source: str) -> list:
    position = {layer.name: i for i, layer in enumerate(layers)}
    pending = {layer.name: len(_needs(layer)) for layer in layers}
    users: dict[str, list[str]] = {}
    for layer in layers:
        for parent in _needs(layer):
            users.setdefault(parent, []).append(layer.name)
    ready = [(position[n], n) for n, count in pending.items() if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, name = heapq.heappop(ready)
        order.append(by_name[name])
        for user in users.get(name, []):
            pending[user] -= 1
            if pending[user] == 0:
                heapq.heappush(ready, (position[user], user))
    if len(order) != len(layers):
        stuck = [layer.name for layer in layers if pending[layer.name] > 0]
        raise FormatError(f"{source}: the layer graph has a cycle through layers {', '.join(stuck[:8])}")
    return order


def _needs(layer) -> set[str]:
    """Layers that must be set up first: the parents and the hint layer (its dims are copied)."""
    return {*layer.parents, *([layer.hint_layer] if layer.hint_layer else [])}


def _dropped(order, children, by_name) -> set[str]:
    """Training-only layers and every layer downstream of one."""
    dropped: set[str] = set()
    for layer in order:
        if layer.WhichOneof("layer_type") in TRAINING_ONLY or any(p in dropped for p in layer.parents):
            dropped.add(layer.name)
    hinted = {layer.hint_layer for layer in order if layer.name not in dropped}
    lone = _inputs_only(order)
    for layer in reversed(order):  # inputs that feed nothing but dropped layers
        if layer.WhichOneof("layer_type") == "input" and layer.name not in hinted and not lone and \
                all(c in dropped for c in children[layer.name]):
            dropped.add(layer.name)
    return dropped


def _inputs_only(layers) -> bool:
    """A model of input layers alone (LBANN's data-reader tests): its inputs are its outputs."""
    return all(layer.WhichOneof("layer_type") == "input" for layer in layers)


def _hint_dims(layer, outputs, source: str) -> tuple[int, ...] | None:
    if not layer.hint_layer:
        return None
    if layer.hint_layer not in outputs:
        raise UnsupportedOpError(f"LBANN import of {source}", [Unsupported(
            layer.WhichOneof("layer_type") or "?", layer.name,
            f"its hint_layer '{layer.hint_layer}' is a training-only layer, which import leaves out")])
    return outputs[layer.hint_layer][0].dims


def _parent_output(layer, parent: str, outputs, children, source: str) -> Tensor:
    outs = outputs[parent]
    if len(outs) == 1:
        return outs[0]
    index = children[parent].index(layer.name) if layer.name in children[parent] else -1
    if not 0 <= index < len(outs):
        raise FormatError(f"{source}: layer '{layer.name}' reads parent '{parent}', which has {len(outs)} "
                          f"outputs and only feeds its first {len(outs)} children")
    return outs[index]


def _set_outputs(graph: Graph, kept, children, outputs, header: textio.Header, dropped: set[str]) -> None:
    by_kind = {layer.name: layer.WhichOneof("layer_type") for layer in kept}
    leaves = [layer.name for layer in kept if not [c for c in children[layer.name] if c not in dropped]
              and (by_kind[layer.name] != "input" or _inputs_only(kept))]
    names = [n for n in header.outputs if n in outputs]
    # the recorded outputs, and the loss and metric layers when those are imported
    names = [*names, *(n for n in leaves if n not in names and by_kind[n] in TRAINING_ONLY)] if names else leaves
    for n in names:
        graph.outputs.extend(t.value for t in outputs[n])
    if not graph.outputs:
        why = (f"; its {len(dropped)} layers are losses, metrics or what only feeds those, which import leaves "
               f"out unless asked (--lbann-training-layers, API lbann_training_layers=True)") if dropped else ""
        raise FormatError(f"model '{graph.name}' has no layer that could be a graph output{why}")
