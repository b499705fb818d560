"""Reading and writing the two SMAUG files as protobuf messages (no IR here).

``<name>_topo.pbtxt`` is a text ``GraphProto`` printed with protobuf's default
printer (that is what makes our output byte-identical to the frontend's);
``<name>_params.pb`` is a binary ``TensorDataArray``.
"""

from __future__ import annotations

import os
from pathlib import Path

from google.protobuf import message, text_format

from ...base.errors import FormatError
from ...base.fileio import atomic_outputs
from ...protos.smaug import smaug_graph_pb2 as gpb
from ...protos.smaug import smaug_tensor_pb2 as tpb
from .fast_text import parse_printed
from .params import ParamsFile

TOPO_SUFFIX = "_topo.pbtxt"
PARAMS_SUFFIX = "_params.pb"


def model_paths(path: str | os.PathLike) -> tuple[Path, Path]:
    """``x_topo.pbtxt`` / ``x_params.pb`` / ``x`` (a prefix) → the two file paths."""
    path = Path(path)
    name = path.name
    for suffix in (TOPO_SUFFIX, PARAMS_SUFFIX):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    else:
        if path.is_file():  # a topology named otherwise (found by its content): params beside it as <stem>_params.pb
            return path, path.with_name(path.stem + PARAMS_SUFFIX)
    return path.with_name(name + TOPO_SUFFIX), path.with_name(name + PARAMS_SUFFIX)


def read_topology(path: str | os.PathLike) -> gpb.GraphProto:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FormatError(f"{path}: cannot read SMAUG topology: {exc}") from None
    return parse_topology(text, str(path))


def parse_topology(text: str, what: str = "<topology>") -> gpb.GraphProto:
    graph = gpb.GraphProto()
    if parse_printed(text, graph):
        return graph
    try:
        text_format.Parse(text, graph)
    except text_format.ParseError as exc:
        raise FormatError(f"{what}: not a valid SMAUG topology (text GraphProto): {exc}") from None
    return graph


def read_params(path: str | os.PathLike) -> tpb.TensorDataArray:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FormatError(f"{path}: cannot read SMAUG params: {exc}") from None
    array = tpb.TensorDataArray()
    try:
        array.ParseFromString(data)
    except message.DecodeError as exc:
        raise FormatError(f"{path}: not a valid SMAUG params file (binary TensorDataArray): {exc}") from None
    return array


def topology_text(graph: gpb.GraphProto) -> str:
    return text_format.MessageToString(graph)


def write_model(graph: gpb.GraphProto, params: ParamsFile, path: str | os.PathLike) -> tuple[Path, Path]:
    """Write both files of the model at ``path`` (see ``model_paths``)."""
    return write_files(graph, params, *model_paths(path))


def write_files(graph: gpb.GraphProto, params: ParamsFile, topo: Path, par: Path) -> tuple[Path, Path]:
    """Write both files atomically: either both appear or neither does."""
    text = topology_text(graph).encode("utf-8")
    with atomic_outputs([topo, par]) as (tmp_topo, tmp_params):
        tmp_topo.write_bytes(text)
        with open(tmp_params, "wb") as fh:
            for chunk in params.chunks():
                fh.write(chunk)
    return topo, par
