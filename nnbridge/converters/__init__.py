"""File formats, chosen by file name. Each format registers a loader and a saver.

A converter only translates between a file format and ``ir.Graph``; it never
imports a backend. ``nnbridge ops`` and ``nnbridge convert`` read this registry.
"""

from __future__ import annotations

import importlib
import os
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.errors import FormatError, InputError
from ..base.fileio import check_destination, check_output_size
from ..base.registry import Registry
from ..ir import Graph


@dataclass(frozen=True)
class Format:
    name: str
    suffixes: tuple[str, ...]  # matched against the end of the file name
    load: Callable[..., Graph] | None
    save: Callable[..., Any] | None
    description: str = ""
    #: ops this format can express (None: everything the IR has); for `nnbridge ops`
    supported_ops: Callable[[], set[str]] | None = None
    #: option names its loader takes (``convert`` routes the others to the writer)
    load_options: frozenset[str] = frozenset()
    #: option names its writer takes; any other option a load or save is given is refused
    save_options: frozenset[str] = frozenset()
    #: the files a save to this path writes (the destination and its side files), for reports
    written: Callable[[Path], list[Path]] = lambda path: [path]
    #: what a user of a file it wrote must know (e.g. the runtime builds that can run it)
    notes: Callable[[Path], list[str]] = lambda path: []
    #: its files store concrete tensor sizes: dynamic input dims must be pinned before writing
    #: ("all", or "per-sample" where the batch is the file's own mini-batch size)
    static_shapes: str = ""
    #: (the copy of a graph its writer maps — folded, shapes inferred, rewritten by the
    #: decompositions table of ir/decompositions.py — and how many nodes of each op were
    #: rewritten), given the writer's options; None: the writer maps the graph as it is
    prepare: Callable[[Graph, Mapping[str, Any]], tuple[Graph, Counter]] | None = None


FORMATS: Registry[str, Format] = Registry("formats")
#: modules that register formats when imported (new formats add themselves here)
_FORMAT_MODULES = ["nnbridge.converters.onnx", "nnbridge.converters.smaug",
                   "nnbridge.converters.lbann"]


def register_format(fmt: Format) -> Format:
    return FORMATS.register(fmt.name, fmt, origin=fmt.save.__module__ if fmt.save else None)


def formats() -> dict[str, Format]:
    for module in _FORMAT_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
    return dict(FORMATS)


def format_for(path: str | os.PathLike, fmt: str | None = None) -> Format:
    table = formats()
    if fmt is not None:
        if fmt not in table:
            raise FormatError(f"unknown format '{fmt}'; known: {', '.join(sorted(table))}")
        return table[fmt]
    name = Path(path).name.lower()
    matches = [f for f in table.values() for s in f.suffixes if name.endswith(s)]
    if not matches:
        sniffed = sniff_format(path)
        if sniffed is not None:
            return table[sniffed]
        known = ", ".join(s for f in table.values() for s in f.suffixes)
        raise FormatError(f"{path}: cannot tell the model format from the file name (known: {known}) or its "
                          f"content; name it so, or pass --format {'|'.join(sorted(table))}")
    return max(matches, key=lambda f: max(len(s) for s in f.suffixes if name.endswith(s)))


_LBANN_TOP = re.compile(r"^\s*(model|trainer|optimizer|data_reader)\s*\{", re.M)
_SMAUG_TOP = re.compile(r"^\s*nodes\s*\{", re.M)


def sniff_format(path: str | os.PathLike) -> str | None:
    """The format of an existing file from its first bytes when its name does not tell: LBANN and
    SMAUG by their top-level prototext fields, ONNX by a ModelProto's first field (ir_version)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 16)
    except OSError:
        return None
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and _LBANN_TOP.search(text):
        return "lbann"
    if text is not None and _SMAUG_TOP.search(text) and re.search(r"^\s*(backend|name)\s*:", text, re.M):
        return "smaug"
    if head[:1] == b"\x08":  # field 1 (ir_version), varint: how every ONNX file starts
        return "onnx"
    return None


def load_model(path: str | os.PathLike, fmt: str | None = None, *, dims: Mapping[str, int] | None = None,
               **options) -> Graph:
    """The file's graph. ``input_shapes`` are whole input shapes that pin dynamic dims (a format that
    does not store shapes, LBANN, takes them per sample itself); ``dims`` pin symbolic dims."""
    f = format_for(path, fmt)
    if f.load is None:
        raise FormatError(f"{path}: nnbridge can write {f.name} files but not read them")
    _refuse_unread(options, f.load_options | {"input_shapes"}, f"reading the {f.name} file '{os.fspath(path)}'")
    shapes = None if "input_shapes" in f.load_options else options.pop("input_shapes", None)
    graph = f.load(path, **options)
    if shapes or dims:
        from ..passes.pin_shapes import pin_shapes

        pin_shapes(graph, shapes, dims)
    return graph


def _refuse_unread(options: Mapping[str, Any], takes: frozenset[str] | set[str], doing: str) -> None:
    """One line for options the format's reader or writer would not read (another format's, a typo)."""
    unread = sorted(set(options) - set(takes))
    if unread:
        from ..base.errors import OptionError

        raise OptionError(f"{', '.join(unread)}: not read when {doing} (it takes {', '.join(sorted(takes)) or 'none'})")


def save_model(graph: Graph, path: str | os.PathLike, fmt: str | None = None, **options) -> Any:
    check_destination(path)  # a directory, a NUL, a name too long: refused before any work
    f = format_for(path, fmt)
    if f.save is None:
        raise FormatError(f"{path}: nnbridge can read {f.name} files but not write them")
    _refuse_unread(options, f.save_options, f"writing the {f.name} file '{os.fspath(path)}'")
    if f.static_shapes:
        from ..passes.pin_shapes import describe_dynamic, dynamic_inputs, pinning_hint

        dynamic = dynamic_inputs(graph, per_sample=f.static_shapes == "per-sample")
        if dynamic:
            raise InputError(f"{f.name} files store static shapes; '{graph.name}' has dynamic inputs "
                             f"{describe_dynamic(dynamic)}: pin them with {pinning_hint(dynamic)}")
    weights = sum(int(getattr(a, "nbytes", 0)) for a in graph.initializers.values())
    check_output_size(weights, path, f"writing '{os.fspath(path)}'")
    return f.save(graph, path, **options)
