"""Outputs saved by one run and judged in another (``check --save-outputs/--load-outputs``).

The file is an ``.npz`` holding the inputs (``input/<name>``), the outputs (``output/<name>``) and
a JSON record of what produced them (``meta``: backend, nnbridge version, rule, model), stored as
bytes so that nothing in it is ever unpickled: every member is read by ``fileio.read_npy``,
which refuses object arrays. A run on another machine or version is judged here on its own inputs.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base.errors import FormatError, InputError, UsageError
from ..base.fileio import TENSOR_SHARE, atomic_write, memory_budget, read_npy
from ..ir import DType, Graph
from .result import CheckResult
from .verdict import RULES

_INPUT, _OUTPUT, _META = "input/", "output/", "meta"


@dataclass
class SavedRun:
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]
    meta: dict[str, Any]

    @property
    def format(self) -> DType | None:
        """The number format the saved run was judged in (its rule's), when the record says."""
        rule = RULES.get(str(self.meta.get("format")))
        return rule.format if rule else None

    def describe(self) -> str:
        """Who produced the outputs, for the oracle column: ``run1.npz (smv, nnbridge 0.1.0)``."""
        m = self.meta
        return f"{m.get('file', 'saved outputs')} ({m.get('backend', '?')}, nnbridge {m.get('version', '?')})"


def write_saved(path: str | os.PathLike, inputs: Mapping[str, Any], outputs: Mapping[str, Any],
                 meta: Mapping[str, Any]) -> None:
    """Write ``inputs``, ``outputs`` (tensors) and ``meta`` (JSON-able) to ``path``."""
    from ..base.version import __version__

    arrays = {}
    for prefix, values in ((_INPUT, inputs), (_OUTPUT, outputs)):
        for name, value in values.items():
            array = None if isinstance(value, (list, tuple, dict)) else np.asarray(value)
            if array is None or array.dtype.hasobject:
                raise InputError(f"--save-outputs {os.fspath(path)}: '{name}' is not a tensor "
                                 f"({type(value).__name__}); only tensor inputs and outputs can be saved")
            arrays[prefix + name] = array
    record = json.dumps({**meta, "version": __version__}).encode()
    arrays[_META] = np.frombuffer(record, np.uint8)
    try:
        with atomic_write(path) as fh:
            np.savez(fh, **arrays)
    except OSError as exc:
        raise InputError(f"--save-outputs {os.fspath(path)}: cannot write it ({exc.strerror or exc})") from None


def read_saved(path: str | os.PathLike) -> SavedRun:
    """The inputs, outputs and record ``write_saved`` wrote; anything else is refused in one line."""
    where = f"--load-outputs {os.fspath(path)}"
    try:
        archive = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise InputError(f"{where}: no such file") from None
    except (OSError, zipfile.BadZipFile) as exc:
        raise FormatError(f"{where}: not an .npz archive ({exc}); write one with check --save-outputs") from None
    run = SavedRun({}, {}, {})
    with archive:
        for member in archive.infolist():
            key = member.filename.removesuffix(".npy")
            if member.file_size > memory_budget() // TENSOR_SHARE:  # before inflating it
                raise FormatError(f"{where}: member '{key}' inflates to {member.file_size:.3g} bytes, over a "
                                  f"quarter of the memory budget; raise it with --max-memory")
            array = read_npy(archive.read(member), f"{where}: '{key}'")
            if key == _META:
                try:
                    run.meta = json.loads(array.tobytes().decode())
                except ValueError:
                    raise FormatError(f"{where}: its 'meta' record is not JSON") from None
            elif key.startswith(_INPUT):
                run.inputs[key.removeprefix(_INPUT)] = array
            elif key.startswith(_OUTPUT):
                run.outputs[key.removeprefix(_OUTPUT)] = array
            else:
                raise FormatError(f"{where}: unexpected member '{key}'; the file holds input/<name>, "
                                  "output/<name> and meta (written by check --save-outputs)")
    if not run.outputs or not isinstance(run.meta, dict):
        raise FormatError(f"{where}: no outputs or no 'meta' record; write the file with check --save-outputs")
    run.meta["file"] = os.path.basename(os.fspath(path))
    return run


def matched(run: SavedRun, names: list[str], shapes: Mapping[str, tuple[int, ...]], where: str) -> None:
    """Refuse, in one line, saved outputs whose names or shapes are not the current run's."""
    missing, extra = [n for n in names if n not in run.outputs], [n for n in run.outputs if n not in names]
    if missing or extra:
        raise InputError(f"{where}: the saved outputs are {sorted(run.outputs)} but this run's are {names}"
                         + (f" (missing {missing})" if missing else "") + (f" (extra {extra})" if extra else ""))
    for name in names:
        if name in shapes and tuple(run.outputs[name].shape) != tuple(shapes[name]):
            raise InputError(f"{where}: output '{name}' was saved with shape {list(run.outputs[name].shape)}, "
                             f"this run's is {list(shapes[name])}; save it again with the same inputs")


def opened(path: str | os.PathLike, options: Mapping[str, Any]) -> SavedRun:
    """The run saved in ``path``; options that would make or judge other inputs are refused (the saved
    inputs are the ones used)."""
    where = f"--load-outputs {os.fspath(path)}"
    for option, given in options.items():
        if given:
            raise UsageError(f"{where}: cannot be combined with {option} (the saved inputs and outputs are "
                             "the reference); drop one of them")
    return read_saved(path)


def model_inputs(saved: SavedRun, graph: Graph, where: str) -> dict[str, np.ndarray]:
    """The saved inputs, refused in one line unless they are exactly the model's inputs."""
    names = [v.name for v in graph.inputs]
    if sorted(saved.inputs) != sorted(names):
        raise InputError(f"--load-outputs {where}: the saved inputs are {sorted(saved.inputs)} but the model "
                         f"takes {names}; save the outputs of this model")
    return saved.inputs


def saved_to(path: str | os.PathLike | None, result: CheckResult) -> CheckResult:
    """``result``, its inputs and outputs written to ``path`` first when one is given."""
    if path is not None:
        write_saved(path, result.inputs, result.actual,
                    {"backend": result.backend, "model": result.model, "format": result.rule.to_dict()["format"],
                     "rule": result.rule.describe(), "oracle": result.oracle})
    return result

