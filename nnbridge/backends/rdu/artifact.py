"""The compiled artifact ("PEF", after SambaFlow's executable): a zip archive, no pickle.

Members (all described in docs/rdu.md):

* ``manifest.json`` — ``{"format": "nnbridge-pef", "version": 1, "producer": …,
  "members": {name: {"sha256": hex, "size": bytes}}}``; every other member must be listed
  with its SHA-256, so a corrupt or tampered file is refused before anything is used.
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
from typing import Any

import numpy as np

from ...errors import FormatError
from ...fileio import atomic_write, max_elements, read_npy
from ...ir import Graph
from .graph_codec import decode_graph, encode_graph

FORMAT = "nnbridge-pef"
VERSION = 1


def write_pef(path: str | os.PathLike, graph: Graph, plan: dict[str, Any]) -> None:
    """Write the artifact atomically (a failed write leaves no partial file)."""
    from ...version import __version__

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
    """The graph and plan of an artifact, after checking every member against the manifest."""
    where = f"PEF '{os.fspath(path)}'"
    if not os.path.isfile(path):
        raise FormatError(f"{where}: no such file")
    try:
        with zipfile.ZipFile(path) as zf:
            members = _verified_members(zf, where)
    except zipfile.BadZipFile as exc:
        raise FormatError(f"{where} is not a valid artifact (not a readable zip archive: {exc})") from None
    except (zlib.error, EOFError, OSError) as exc:
        raise FormatError(f"{where} is corrupt ({type(exc).__name__}: {exc})") from None
    except (NotImplementedError, RuntimeError) as exc:  # compression methods, versions, encryption
        raise FormatError(f"{where} uses a zip feature nnbridge does not write ({exc})") from None
    arrays = {}
    for name, data in members.items():
        if name.startswith("weights/"):
            arrays[name[len("weights/"):-len(".npy")]] = _load_npy(data, name, where)
    try:
        program = json.loads(members["program.json"])
        plan = json.loads(members["plan.json"])
    except (KeyError, ValueError) as exc:
        raise FormatError(f"{where}: program or plan is missing or not JSON ({exc})") from None
    return decode_graph(program, arrays), plan


def _verified_members(zf: zipfile.ZipFile, where: str) -> dict[str, bytes]:
    names = set(zf.namelist())
    if "manifest.json" not in names:
        raise FormatError(f"{where} has no manifest.json; it is not an nnbridge artifact")
    try:
        manifest = json.loads(zf.read("manifest.json"))
        listed = manifest["members"]
        if manifest.get("format") != FORMAT:
            raise FormatError(f"{where} is a '{manifest.get('format')}' file, not an {FORMAT}")
    except (ValueError, KeyError, TypeError) as exc:
        raise FormatError(f"{where}: manifest.json is unreadable ({exc})") from None
    if manifest.get("version") != VERSION:
        raise FormatError(f"{where} has format version {manifest.get('version')}; this nnbridge reads {VERSION}")
    extra = sorted(names - set(listed) - {"manifest.json"})
    missing = sorted(set(listed) - names)
    if extra or missing:
        raise FormatError(f"{where} failed its integrity check: members not in the manifest {extra}, "
                          f"missing members {missing} (the file was modified)")
    members = {}
    for name, entry in listed.items():
        info = zf.getinfo(name)
        if info.file_size > max_elements() * 8 or info.file_size != entry.get("size"):
            raise FormatError(f"{where} failed its integrity check: member '{name}' has size "
                              f"{info.file_size}, the manifest says {entry.get('size')}")
        data = zf.read(name)
        if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
            raise FormatError(f"{where} failed its integrity check: SHA-256 of '{name}' does not match "
                              "the manifest (the file is corrupt or was tampered with)")
        members[name] = data
    return members


def _load_npy(data: bytes, name: str, where: str) -> np.ndarray:
    return read_npy(data, f"{where}: '{name}'")
