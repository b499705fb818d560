"""The compiled artifact ("PEF", after SambaFlow's executable): a zip archive, no pickle.

Members (all described in docs/rdu.md):

* ``manifest.json`` — ``{"format": "nnbridge-pef", "version": 1, "producer": …,
  "members": {name: {"sha256": hex, "size": bytes}}}``; every other member must be listed
  with its SHA-256; a member is read only when the program refers to it, size-checked first.
* ``program.json`` — the IR graph (ops, attributes, types); arrays by reference.
* ``plan.json`` — machine description, compile options, sections with their kernels and
  placement (PCU/PMU index ranges), and the schedule (section order, reconfigurations,
  spills/fills, weight loads).
* ``weights/<key>.npy`` — initializers and tensor attributes, loaded with allow_pickle=False.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ...base.errors import FormatError
from ...base.fileio import TENSOR_SHARE, atomic_write, memory_budget, read_npy
from ...ir import NNBRIDGE_DOMAIN, Graph, TypeKind
from .graph_codec import decode_graph, encode_graph

FORMAT = "nnbridge-pef"
VERSION = 1


def write_pef(path: str | os.PathLike, graph: Graph, plan: dict[str, Any]) -> None:
    """Write the artifact atomically (a failed write leaves no partial file)."""
    from ...base.version import __version__

    arrays: dict[str, np.ndarray] = {}
    members: dict[str, bytes] = {
        "program.json": json.dumps(encode_graph(graph, arrays), indent=1).encode(),
        "plan.json": json.dumps(plan, indent=1).encode(),
    }
    for key, array in arrays.items():
        if array.dtype.hasobject:
            raise FormatError(f"tensor '{key}' of graph '{graph.name}' holds Python objects; a PEF stores "
                              "numeric tensors only")
        buf = io.BytesIO()
        np.save(buf, array, allow_pickle=False)
        members[f"weights/{key}.npy"] = buf.getvalue()
    manifest = {"format": FORMAT, "version": VERSION, "producer": f"nnbridge {__version__}",
                "members": {name: {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
                            for name, data in members.items()}}
    with atomic_write(path, "wb") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", json.dumps(manifest, indent=1))
        for name, data in members.items():
            zf.writestr(name, data)


def read_pef(path: str | os.PathLike) -> tuple[Graph, dict[str, Any]]:
    """The graph and plan of an artifact. Only the members the program refers to are read, each
    size-checked against the memory budget before it is read and checked against its manifest
    entry after; the graph's shapes and ops are checked before anything uses them."""
    where = f"PEF '{os.fspath(path)}'"
    if not os.path.isfile(path):
        raise FormatError(f"{where}: no such file")
    try:
        with zipfile.ZipFile(path) as zf:
            members = _Members(zf, _manifest(zf, where), where)
            try:
                program = json.loads(members.read("program.json"))
                plan = json.loads(members.read("plan.json"))
            except ValueError as exc:
                raise FormatError(f"{where}: program or plan is not JSON ({exc})") from None
            graph = decode_graph(program, _Arrays(members))
    except zipfile.BadZipFile as exc:
        raise FormatError(f"{where} is not a valid artifact (not a readable zip archive: {exc})") from None
    except UnicodeDecodeError:
        raise FormatError(f"{where}: a member name is not valid UTF-8 (the file was not written by "
                          "nnbridge, or was modified)") from None
    except (zlib.error, EOFError, OSError) as exc:
        raise FormatError(f"{where} is corrupt ({type(exc).__name__}: {exc})") from None
    except (NotImplementedError, RuntimeError) as exc:  # compression methods, versions, encryption
        raise FormatError(f"{where} uses a zip feature nnbridge does not write ({exc})") from None
    _check_program(graph, where)
    return graph, plan


def _manifest(zf: zipfile.ZipFile, where: str) -> dict[str, dict[str, Any]]:
    """The manifest's ``members`` table, checked for shape, and the archive's names against it."""
    names = set(zf.namelist())
    if "manifest.json" not in names:
        raise FormatError(f"{where} has no manifest.json; it is not an nnbridge artifact")
    _check_budget(zf.getinfo("manifest.json"), where)
    try:
        manifest = json.loads(zf.read("manifest.json"))
    except ValueError as exc:
        raise FormatError(f"{where}: manifest.json is unreadable ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        kind = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise FormatError(f"{where} is a '{kind}' file, not an {FORMAT}")
    if manifest.get("version") != VERSION:
        raise FormatError(f"{where} has format version {manifest.get('version')}; this nnbridge reads {VERSION}")
    listed = manifest.get("members")
    if not isinstance(listed, dict) or not all(
            isinstance(e, dict) and isinstance(e.get("sha256"), str) and type(e.get("size")) is int
            for e in listed.values()):
        raise FormatError(f"{where}: manifest.json 'members' should map each member's name to its sha256 "
                          f"and size, not {type(listed).__name__} {str(listed)[:60]}")
    extra = sorted(names - set(listed) - {"manifest.json"})
    missing = sorted(set(listed) - names)
    if extra or missing:
        raise FormatError(f"{where} failed its integrity check: members not in the manifest {extra}, "
                          f"missing members {missing} (the file was modified)")
    return listed


def _check_budget(info: zipfile.ZipInfo, where: str) -> None:
    """Refuse a member whose stated size would not fit the memory budget, before reading it
    (zipfile never inflates a member past its stated size)."""
    limit = memory_budget() // TENSOR_SHARE
    if info.file_size > limit:
        raise FormatError(f"{where}: member '{info.filename}' holds {info.file_size / 2**20:,.1f} MiB, over the "
                          f"limit of {limit / 2**20:,.1f} MiB (a quarter of the memory budget; raise it with "
                          "--max-memory)")


class _Members:
    """The members of an open artifact, each read on first use and checked against the manifest."""

    def __init__(self, zf: zipfile.ZipFile, listed: dict[str, dict[str, Any]], where: str):
        self.zf, self.listed, self.where = zf, listed, where

    def read(self, name: str) -> bytes:
        if name not in self.listed:
            raise FormatError(f"{self.where}: member '{name}' is missing")
        info, entry = self.zf.getinfo(name), self.listed[name]
        _check_budget(info, self.where)
        if info.file_size != entry["size"]:
            raise FormatError(f"{self.where} failed its integrity check: member '{name}' has size "
                              f"{info.file_size}, the manifest says {entry['size']}")
        data = self.zf.read(name)
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise FormatError(f"{self.where} failed its integrity check: SHA-256 of '{name}' does not match "
                              "the manifest (the file is corrupt or was tampered with)")
        return data


class _Arrays(Mapping[str, np.ndarray]):
    """The program's arrays by key (``weights/<key>.npy``), each loaded when the program refers
    to it: a member nothing refers to is never read."""

    def __init__(self, members: _Members):
        self.members = members
        self.keys_ = [n[len("weights/"):-len(".npy")] for n in members.listed
                      if n.startswith("weights/") and n.endswith(".npy")]

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self.keys_:
            raise KeyError(key)
        name = f"weights/{key}.npy"
        return read_npy(self.members.read(name), f"{self.members.where}: '{name}'")

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys_)

    def __len__(self) -> int:
        return len(self.keys_)


def _check_program(graph: Graph, where: str) -> None:
    """A compiled graph has static shapes and only ops with kernels: a stored program that says
    otherwise was not written by nnbridge."""
    for v in (*graph.inputs, *graph.outputs):
        shape = v.type.shape
        if v.type.kind is TypeKind.TENSOR and (shape is None or not all(
                type(d) is int and d >= 0 for d in shape)):
            raise FormatError(f"{where}: program.json gives graph {'input' if v in graph.inputs else 'output'} "
                              f"'{v.name}' the shape {shape if shape is None else list(shape)}; a compiled "
                              "program's shapes are lists of non-negative integers")
    from ...kernels import get_kernel

    for node in graph.walk():
        if get_kernel(node.op, node.domain) is None and (node.op, node.domain) != ("Fused", NNBRIDGE_DOMAIN):
            op = f"{node.domain}::{node.op}" if node.domain else node.op
            raise FormatError(f"{where}: program.json node '{node.name}' has op {op}, which no nnbridge "
                              "kernel implements (the program was not written by nnbridge, or was modified)")
