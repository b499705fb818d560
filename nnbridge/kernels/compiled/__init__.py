"""Compiled kernels: numba functions for the loops numpy cannot run as a few large array operations.

Each module here holds the compiled loops of one op family (``conv``, ``rnn``, …). A numpy kernel
of ``kernels/ops`` asks for them with ``load("conv")`` and gets None when numba is not installed
or ``NNBRIDGE_NO_NUMBA=1`` was set when the process started (or inside ``numpy_only()``); it then
runs its numpy path, which stays the reference the compiled loops must equal
(``tests/reference/test_compiled.py``). numba is imported only when a kernel first asks,
so a model that needs no compiled loop never pays for the import.

Compiled machine code is cached on disk (``cache=True``) after first use, in ``cache_dir()``: a
directory named after a hash of these modules' sources, under ``NUMBA_CACHE_DIR`` when the user
set it, else under ``$XDG_CACHE_HOME/nnbridge/numba`` (by default ``~/.cache/nnbridge/numba``),
a per-user directory, so a read-only install caches too. numba itself only notices a change to
the file that holds a function, not to the helpers it calls from another module; the hash makes
any change to any of them start a fresh cache.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import importlib
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from ...base.errors import NNBridgeError

#: set to 1 (or any value but 0 and empty) before the process starts to run the numpy kernels only
DISABLE = "NNBRIDGE_NO_NUMBA"

_LOCK = threading.RLock()  # re-entered only by a broken import, which ``load`` then names
_IMPORTING = threading.local()
_MODULES: dict[str, ModuleType | None] = {}
_NUMBA: list[ModuleType | None] = []  # [numba] once tried, [None] when it failed to import
_TBB: list[bool] = []  # [numba's TBB layer loaded] once numba was tried


def _asked_off() -> bool:
    return os.environ.get(DISABLE, "") not in ("", "0")


#: the switch, read from the environment once (a kernel asks on every call, and a lookup of an
#: unset variable costs 0.7 µs, more than a small map's whole compiled loop); ``numpy_only`` flips it
_OFF = [_asked_off()]


def disabled() -> bool:
    """True when the numpy kernels only are to run: ``NNBRIDGE_NO_NUMBA`` as the process started,
    or inside ``numpy_only``."""
    return _OFF[0]


@contextlib.contextmanager
def numpy_only(off: bool = True) -> Iterator[None]:
    """Run the numpy kernels only (``off=False``: the compiled ones) inside the block, as
    ``NNBRIDGE_NO_NUMBA`` does for a whole process: the compiled kernels' tests compare the two."""
    saved = _OFF[0]
    _OFF[0] = off
    try:
        yield
    finally:
        _OFF[0] = saved


def _numba() -> ModuleType | None:
    if not _NUMBA:
        try:
            import numba
        except ImportError:  # the fallback: every kernel has its numpy path
            numba = None
        _NUMBA.append(numba)
        _TBB.append(numba is not None and _use_tbb(numba))
    return _NUMBA[0]


def _use_tbb(numba: ModuleType) -> bool:
    """Make TBB numba's threading layer: its idle workers yield the core (OpenMP's spin, and starved
    OpenBLAS's threads 15-fold at 2 threads), a loop starts in about 2 µs where a Python pool's
    fork and join costs 45-55 µs, and a part no worker came for runs in the calling thread. The
    ``tbb`` wheel puts ``libtbb.so.12`` in the environment's ``lib``, where numba does not look."""
    if os.environ.get("NUMBA_THREADING_LAYER", "tbb") != "tbb":
        return False  # the user chose another layer: kernel threads stay the Python pool
    try:
        from importlib import metadata

        paths = [Path(str(f.locate())) for f in metadata.files("tbb") or () if f.name.startswith("libtbb.so.12")]
    except metadata.PackageNotFoundError:
        paths = []
    for path in [*paths, Path(sys.prefix) / "lib" / "libtbb.so.12"]:
        try:
            ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
            importlib.import_module("numba.np.ufunc.tbbpool")
        except (OSError, ImportError):
            continue
        numba.config.THREADING_LAYER = "tbb"
        return True
    return False


def kernel_threads() -> bool:
    """True when compiled loops may share their blocks over threads themselves (numba came in and
    its TBB layer loaded): ``kernels.parallel`` then calls a kernel's ``prange`` twin instead of
    handing Python closures to its thread pool."""
    return bool(_TBB) and _TBB[0]


def _sources_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    """Where compiled kernels are kept between processes."""
    given = os.environ.get("NUMBA_CACHE_DIR")
    if given:
        return Path(given) / f"nnbridge-{_sources_hash()}"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "nnbridge" / "numba" / _sources_hash()


def load(family: str) -> ModuleType | None:
    """The compiled module of an op family, or None: numba missing or switched off."""
    if disabled():
        return None
    module = _MODULES.get(family)
    if module is None and family not in _MODULES:
        with _LOCK:
            if getattr(_IMPORTING, "active", False):
                raise NNBridgeError("importing numba ran nnbridge again: a file of yours shadows a standard "
                                    "module numba imports (e.g. a script named timeit.py); rename it")
            if family not in _MODULES:
                _IMPORTING.active = True
                try:
                    _MODULES[family] = _import(family)
                finally:
                    _IMPORTING.active = False
            module = _MODULES[family]
    return module


def loaded(family: str) -> ModuleType | None:
    """The compiled module of an op family once another kernel has brought numba in, else None:
    for a kernel whose numpy path costs only a few µs more, so that it alone never costs numba's
    import (about a second: LeNet's ``nnbridge run`` stays quick). Such a kernel's compiled loop
    must equal its numpy path bit for bit: a run before numba came in took the numpy path."""
    module = _MODULES.get(family)
    if module is not None or _OFF[0]:
        return None if _OFF[0] else module
    return load(family) if any(_MODULES.values()) else None


def _import(family: str) -> ModuleType | None:
    numba = _numba()
    if numba is None:
        return None
    config = numba.config
    saved = config.CACHE_DIR  # numba picks each function's cache directory as it is decorated
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        config.CACHE_DIR = str(directory)
    except OSError:  # no writable home: numba's own choice (beside the source, or its user dir)
        pass
    try:
        return importlib.import_module(f"{__name__}.{family}")
    finally:
        config.CACHE_DIR = saved


def describe() -> str:
    """Which kernels run, for benches and ``nnbridge --version``-style reports."""
    if disabled():
        return f"numpy kernels only ({DISABLE} is set)" if _asked_off() else "numpy kernels only (numpy_only)"
    numba = _numba()
    if numba is None:
        return "numpy kernels only (numba is not installed)"
    pool = ("kernel threads and matrix products on numba's TBB layer" if kernel_threads() else
            "kernel threads on a Python pool, matrix products on BLAS's own (numba's TBB layer did not load: "
            "pip install tbb, and leave NUMBA_THREADING_LAYER unset)")
    blas = load("blas") if kernel_threads() else None
    if blas is not None and not blas.READY:
        pool = ("kernel threads on numba's TBB layer, matrix products on BLAS's own pool ("
                + (f"where to cut OpenBLAS's {blas.CORE} kernels' products keeping their sums was never measured)"
                   if blas.CORE else "numpy's BLAS is not the OpenBLAS its wheels bundle)"))
    return f"numba {numba.__version__} compiled kernels (cache: {cache_dir()}); {pool}"
