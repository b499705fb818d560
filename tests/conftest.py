"""Shared fixtures: where the test data lives (onnx's shipped data, ../shared/data); which cases
run (the heavy matrices' other members only with ``--full-matrix``) and in what order."""

from __future__ import annotations

import ctypes
import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from shared_paths import ONNX_DATA, SHARED_DATA


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full-matrix", action="store_true",
                     help="also run the cases marked matrix (make bench runs them: bench/bench_matrix.py)")


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the xdist_group marks it adds
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A heavy matrix keeps one representative per family in ``make test``; its other members
    (marked ``matrix``) run with ``--full-matrix``. Cases marked ``memory`` (a worker peak over
    1 GB) share one xdist group, so ``--dist loadgroup`` never runs two of them at once. Slow
    cases go first, so that on two workers no long case is left to run alone at the end."""
    for item in items:
        if item.get_closest_marker("memory"):
            item.add_marker(pytest.mark.xdist_group("memory"))
    if not config.getoption("--full-matrix"):
        extra = [item for item in items if item.get_closest_marker("matrix")]
        if extra:
            config.hook.pytest_deselected(items=extra)
            items[:] = [item for item in items if not item.get_closest_marker("matrix")]
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _release_freed_memory() -> None:
    """Collect cycles, then hand freed heap pages back to the OS: glibc raises its mmap threshold
    to the largest block freed (up to 32 MB), after which big arrays come from the heap and their
    pages stay with the process; a worker's RSS crept up module by module without this."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass


@pytest.fixture(autouse=True, scope="module")
def _module_memory() -> Iterator[None]:
    yield
    _release_freed_memory()


#: a test whose worker grew by this much resident memory has its garbage released at once: a
#: model's weights held by a reference cycle (a caught exception's traceback) otherwise stay until
#: a full collection, and the worker's next heavy test peaks on top of them. Measured by growth, not
#: by size: a worker with torch and onnxruntime imported sits above 512 MB, and a full collection
#: after each of its 1,500 tests cost make test minutes
RELEASE_GROWTH = 256 << 20


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # no procfs: the module-scoped release alone
        return 0


@pytest.fixture(autouse=True)
def _test_memory() -> Iterator[None]:
    before = _resident_bytes()
    yield
    if _resident_bytes() - before > RELEASE_GROWTH:
        _release_freed_memory()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"shared data not found at {SHARED_DATA} (set NNBRIDGE_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def onnx_data() -> Path:
    return ONNX_DATA


@pytest.fixture
def cli(capsys):
    """Run the nnbridge command in-process: ``code, text = cli("run", path)``."""
    from nnbridge.cli import main

    def run(*argv) -> tuple[int, str]:
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    return run


@pytest.fixture
def chromium() -> str:
    """A headless browser for the HTML reports' tests (Debian package chromium)."""
    found = next((p for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
                  if os.path.exists(p)), None)
    if found is None:
        pytest.skip("needs a headless Chromium (Debian package chromium)")
    return found
