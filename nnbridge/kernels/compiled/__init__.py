"""Compiled kernels: numba functions for the loops numpy cannot run as a few large array operations.

Each module here holds the compiled loops of one op family (``conv``, ``rnn``, …). A numpy kernel
of ``kernels/ops`` asks for them with ``load("conv")`` and gets None when numba is not installed
or ``NNBRIDGE_NO_NUMBA=1`` is set; it then runs its numpy path, which stays the reference the
compiled loops must equal (``tests/reference/test_compiled.py``). numba is imported only when a
kernel first asks, so a model that needs no compiled loop never pays for the import.

Compiled machine code is cached on disk (``cache=True``) after first use, in ``cache_dir()``: a
directory named after a hash of these modules' sources, under ``NUMBA_CACHE_DIR`` when the user
set it, else under ``$XDG_CACHE_HOME/nnbridge/numba`` (by default ``~/.cache/nnbridge/numba``),
a per-user directory, so a read-only install caches too. numba itself only notices a change to
the file that holds a function, not to the helpers it calls from another module; the hash makes
any change to any of them start a fresh cache.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import threading
from pathlib import Path
from types import ModuleType

#: set to 1 (or any value but 0 and empty) to run the numpy kernels only
DISABLE = "NNBRIDGE_NO_NUMBA"

_LOCK = threading.Lock()
_MODULES: dict[str, ModuleType | None] = {}
_NUMBA: list[ModuleType | None] = []  # [numba] once tried, [None] when it failed to import


def disabled() -> bool:
    """True when the user asked for the numpy kernels only (read on every call, so a test or a
    long-lived process may switch)."""
    return os.environ.get(DISABLE, "") not in ("", "0")


def _numba() -> ModuleType | None:
    if not _NUMBA:
        try:
            import numba
        except ImportError:  # the fallback: every kernel has its numpy path
            numba = None
        _NUMBA.append(numba)
    return _NUMBA[0]


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
            if family not in _MODULES:
                _MODULES[family] = _import(family)
            module = _MODULES[family]
    return module


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
        return f"numpy kernels only ({DISABLE} is set)"
    numba = _numba()
    if numba is None:
        return "numpy kernels only (numba is not installed)"
    return f"numba {numba.__version__} compiled kernels (cache: {cache_dir()})"
