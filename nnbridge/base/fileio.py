"""Safe file handling shared by every converter: atomic writes, path and size limits."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import os
import re
import resource
import shutil
import signal
import stat
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .errors import FormatError, InputError, OutputError, RegistrationError, SecurityError, ShapeError

#: Limits a user sets (``nnbridge --max-memory/--max-output-bytes``, or the environment
#: variables NNBRIDGE_MAX_MEMORY, NNBRIDGE_MAX_OUTPUT_BYTES, NNBRIDGE_MAX_ELEMENTS).
LIMITS: dict[str, int] = {}
#: one tensor may take this share of the memory budget (a kernel holds its inputs and output)
TENSOR_SHARE = 4


def memory_budget() -> int:
    """Bytes nnbridge plans for: the user's limit, else the smaller of physical memory and this
    process's address-space limit."""
    given = LIMITS.get("max_memory") or os.environ.get("NNBRIDGE_MAX_MEMORY")
    if given:
        return parse_size(str(given), "--max-memory")
    budget = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return min(budget, soft) if soft != resource.RLIM_INFINITY else budget


def max_elements() -> int:
    """Largest tensor (in elements) nnbridge will allocate from a file's declaration: a quarter of
    the memory budget in float32, unless NNBRIDGE_MAX_ELEMENTS says otherwise."""
    given = os.environ.get("NNBRIDGE_MAX_ELEMENTS")
    return int(given) if given else memory_budget() // (TENSOR_SHARE * 4)


def check_numel(dims: Sequence[int], what: str) -> int:
    """Refuse negative or absurdly large declared shapes before allocating anything."""
    if any(d < 0 for d in dims):
        raise ShapeError(f"{what}: negative dimension in shape {list(dims)}")
    n = math.prod(dims)
    limit = max_elements()
    if n > limit:
        raise ShapeError(
            f"{what}: declared shape {list(dims)} has {n:.3g} elements, over the limit of {limit:.3g} "
            f"(a quarter of the {memory_budget() / 2**30:.1f} GiB memory budget; raise it with --max-memory)"
        )
    return n


def parse_size(text: str, what: str) -> int:
    """'512M', '8G', '1.5T' or a number of bytes."""
    units = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    body = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = body[-1] if body and body[-1] in units else ""
    try:
        value = float(body[: len(body) - len(unit)])
    except ValueError:
        raise InputError(f"{what} {text}: write a size like 512M, 8G or 1.5T") from None
    if not value > 0 or not math.isfinite(value):
        raise InputError(f"{what} {text}: a size must be positive")
    return int(value * units[unit])


def check_output_size(nbytes: int, path: str | os.PathLike, what: str) -> None:
    """Refuse to start writing ``nbytes`` to ``path`` beyond the user's --max-output-bytes, or beyond
    the free space of the disk it goes to (a full disk harms every file on it)."""
    given = LIMITS.get("max_output_bytes") or os.environ.get("NNBRIDGE_MAX_OUTPUT_BYTES")
    if given:
        limit, why = parse_size(str(given), "--max-output-bytes"), "the --max-output-bytes limit"
    else:
        existing = Path(path).resolve().parent
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        limit, why = shutil.disk_usage(existing).free, f"the free space on {existing}"
    if nbytes > limit:
        raise InputError(f"{what} needs about {nbytes / 2**20:,.1f} MiB, over {why} "
                         f"({limit / 2**20:,.1f} MiB); nothing was written")


def resolve_inside(base_dir: str | Path, relative: str, what: str) -> Path:
    """Resolve a file reference and refuse it if it leaves ``base_dir``."""
    base = Path(base_dir).resolve()
    if os.path.isabs(relative):
        raise SecurityError(f"{what}: absolute path '{relative}' is not allowed")
    target = (base / relative).resolve()
    if target != base and base not in target.parents:
        raise SecurityError(f"{what}: path '{relative}' escapes the model directory {base}")
    return target


def _default_permissions(path: str) -> None:
    """mkstemp makes files owner-only; give outputs the permissions a plain open() would."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: unwinds like KeyboardInterrupt (every ``finally`` and temp-file
    cleanup runs) and, like it, is no ``Exception`` that an error handler could swallow."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")


def _raise_terminated(signum: int, _frame: object) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def unwind_on_signals() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP (what ``timeout``, ``kill``, CI cancellation and a closed terminal
    send) into ``Terminated`` while the block runs, as Python does SIGINT; a no-op off the main
    thread, where handlers cannot be installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _raise_terminated) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


class _HeldSignals:
    """SIGINT, SIGTERM and SIGHUP held back until ``release``: a temp file is made and its name known
    to the cleanup, or a set of files renamed into place, before a signal can unwind. Python runs
    signal handlers on the main thread whichever thread the kernel delivers a signal to, so the
    handlers are swapped for a recorder there (a thread's signal mask would not do: numpy's and
    onnxruntime's threads would take the signal); off the main thread nothing can be held."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self._arrived: list[int] = []
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._record) for s in self.SIGNALS}

    def _record(self, signum: int, _frame: object) -> None:
        self._arrived.append(signum)

    def release(self) -> None:
        """Restore the handlers and deliver what arrived meanwhile (it raises here, inside the
        caller's cleanup); idempotent."""
        previous, self._previous = self._previous, None
        if previous is None:
            return
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        for signum in dict.fromkeys(self._arrived):
            signal.raise_signal(signum)


@contextlib.contextmanager
def _cleaning_up(held: _HeldSignals) -> Iterator[None]:
    """The block (the cleanup of a write) with signals held, then ``held`` released: a signal that
    lands during the cleanup takes effect after it, instead of leaving it half done."""
    inner = _HeldSignals()
    try:
        yield
    finally:
        try:
            inner.release()
        finally:
            held.release()


#: a temp file younger than this may belong to a writer that has not locked it yet
STALE_AFTER_S = 2.0


#: a temp file's name adds ``.`` and ``.XXXXXXXX.tmp`` to its destination's
_TEMP_NAME_EXTRA = 14
#: the file-system errors that say something about the destination, not about nnbridge
_DESTINATION_ERRORS = {errno.EACCES: "permission denied", errno.EPERM: "permission denied",
                       errno.EROFS: "a read-only file system", errno.ENOSPC: "no space left on the device",
                       errno.EDQUOT: "the disk quota is exceeded", errno.EISDIR: "it is a directory",
                       errno.ENOTDIR: "a part of the path is a file, not a directory",
                       errno.ENAMETOOLONG: "the name is too long", errno.EEXIST: "a file of that name exists"}


def check_destination(path: str | Path, what: str = "output") -> Path:
    """Refuse, before anything is written, a destination no file can be written to: a name with
    NUL, a name longer than the file system takes (with room for the temp file's), an existing
    directory, or a parent path that runs through a file."""
    text = os.fspath(path)
    if "\0" in text:
        shown = text.replace("\0", "\\0")
        raise OutputError(f"{what} '{shown}': a file name cannot hold a NUL character")
    path = Path(text)
    name_bytes = len(os.fsencode(path.name))
    if name_bytes + _TEMP_NAME_EXTRA > 255:
        raise OutputError(f"{what} '{path.name[:40]}…': the name is {name_bytes} bytes; file names hold at most "
                          f"{255 - _TEMP_NAME_EXTRA} here (255 less room for the temp file written first)")
    if path.is_dir():
        raise OutputError(f"{what} '{path}' is a directory; name a file to write")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise OutputError(f"{what} '{path}': '{parent}' is a file, not a directory")
            break
    return path


@contextlib.contextmanager
def output_errors(path: str | Path, what: str = "output") -> Iterator[None]:
    """A file-system error about ``path`` as one line naming it and the cause (never "internal error")."""
    try:
        yield
    except OSError as exc:
        cause = _DESTINATION_ERRORS.get(exc.errno or 0)
        if cause is None:
            raise
        raise OutputError(f"cannot write {what} '{os.fspath(path)}': {cause}; nothing was written") from None


def _make_parents(path: Path) -> list[Path]:
    """Create ``path``'s missing parent directories; the ones created, deepest first (for undoing)."""
    missing = [d for d in path.parents if not d.exists()]
    path.parent.mkdir(parents=True, exist_ok=True)
    return missing


def _remove_empty(directories: Sequence[Path]) -> None:
    for directory in sorted(directories, key=lambda d: len(d.parts), reverse=True):  # deepest first
        with contextlib.suppress(OSError):
            directory.rmdir()  # only when empty: another writer's file stays


def _temp_beside(path: Path, directory: bool = False) -> tuple[int, str]:
    """A locked temp file (or directory) ``.NAME.XXXXXXXX.tmp`` beside ``path``, after sweeping
    stale ones; its fd holds the lock. The kernel drops the lock however the process ends, which
    tells a live writer's temp file from one a killed process left behind."""
    sweep_stale_temps(path)
    if directory:
        tmp = tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
    else:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        _default_permissions(tmp)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd, tmp


def sweep_stale_temps(path: str | Path) -> list[Path]:
    """Remove the temp files and directories of nnbridge's own pattern for ``path``
    (``.NAME.XXXXXXXX.tmp``, as ``tempfile`` names them) that no live process holds locked; the
    removed ones. Symbolic links, other kinds of file and files younger than STALE_AFTER_S (a
    writer between creating its temp file and locking it) are never touched."""
    path = Path(path)
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[a-z0-9_]{{8}}\.tmp")
    removed = []
    try:
        candidates = [e.path for e in os.scandir(path.parent) if pattern.fullmatch(e.name)]
    except OSError:  # no such directory yet, or not readable: nothing of ours there
        return removed
    for name in candidates:
        with contextlib.suppress(OSError):
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                info = os.fstat(fd)
                kind = stat.S_IFMT(info.st_mode)
                if kind not in (stat.S_IFREG, stat.S_IFDIR) or time.time() - info.st_mtime < STALE_AFTER_S:
                    continue
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while a live writer holds it
                shutil.rmtree(name) if kind == stat.S_IFDIR else os.unlink(name)
                removed.append(Path(name))
            finally:
                os.close(fd)
    return removed


@contextlib.contextmanager
def temp_dir_beside(path: str | Path) -> Iterator[Path]:
    """A locked scratch directory beside ``path`` for a writer that makes several files (a model and
    its external data): on success every file left in it is renamed beside ``path`` at once
    (``replace_all``); the directory is removed on exit, however it ends."""
    path = check_destination(path)
    held, created, tmp, fd, done = _HeldSignals(), [], None, None, False
    try:
        with output_errors(path):
            created = _make_parents(path)
            fd, tmp = _temp_beside(path, directory=True)
        held.release()
        with output_errors(path):
            yield Path(tmp)
            replace_all([(made, path.parent / made.name) for made in Path(tmp).iterdir()])
        done = True
    finally:
        with _cleaning_up(held):
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            if fd is not None:
                os.close(fd)
            if not done:
                _remove_empty(created)


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "wb") -> Iterator:
    """Write to a temporary file beside ``path`` and rename it into place on success; a destination
    that cannot be written is one ``OutputError`` line, and leaves no file or directory behind."""
    path = check_destination(path)
    held, created, tmp = _HeldSignals(), [], None
    try:
        with output_errors(path):
            created = _make_parents(path)
            fd, tmp = _temp_beside(path)
        held.release()
        with output_errors(path), os.fdopen(fd, mode) as fh:
            yield fh
            fh.flush()
            replace_all([(tmp, path)])
    except BaseException:
        with _cleaning_up(held):
            if tmp is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            _remove_empty(created)
        raise


def replace_all(moves: Iterable[tuple[str | Path, str | Path]]) -> None:
    """Rename each temp file onto its destination with SIGINT, SIGTERM and SIGHUP held: a kill lands
    before the first rename or after the last, never between (a model's topology without its params,
    one output of a run without the next). A signal that arrived meanwhile is raised after the last."""
    held = _HeldSignals()
    try:
        for tmp, final in moves:
            os.replace(tmp, final)
    finally:
        held.release()


@contextlib.contextmanager
def atomic_outputs(paths: Sequence[str | Path]) -> Iterator[list[Path]]:
    """For writers with several files: yields temp paths, renames all on success (``replace_all``);
    a failure or a signal before that removes the temp files and the directories made for them."""
    finals = [check_destination(p) for p in paths]
    locks, temps, created = [], [], []
    held = _HeldSignals()
    try:
        for p in finals:
            with output_errors(p):
                created += _make_parents(p)
                fd, tmp = _temp_beside(p)
            locks.append(fd)
            temps.append(Path(tmp))
        held.release()
        with output_errors(finals[0] if finals else ""):
            yield temps
            replace_all(zip(temps, finals))
    except BaseException:
        with _cleaning_up(held):
            for tmp in temps:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            _remove_empty(created)
        raise
    finally:
        for fd in locks:
            os.close(fd)


def read_toml(path: str | Path, what: str, table: str | None = None) -> dict:
    """A TOML file's content — its ``[table]`` when it has one, else the top level — or one
    InputError line naming ``what`` and the file."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise InputError(f"cannot read {what} '{path}': {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{what} '{path}' is not valid TOML: {exc}") from None
    if table is None:
        return data
    chosen = data.get(table, data)
    if not isinstance(chosen, dict):
        raise InputError(f"{what} '{path}': [{table}] must be a table")
    return chosen


def read_constants(path: Path, keys: Sequence[str], table: str | None = None) -> dict[str, dict[str, Any]]:
    """The entries ``{name: {key: value}}`` of a data file of constants shipped beside their module
    (each number with its provenance, read at import), or of its ``[table]``: every entry a table of
    exactly ``keys``, one of them ``value``, which for a ``*_bytes`` entry (or ``*_bytes`` key inside
    it) may be a size ("256 KiB"). A missing or bad file or entry is one RegistrationError line
    naming the file and the entry."""
    try:
        data = read_toml(path, "nnbridge data file")
    except InputError as exc:
        raise RegistrationError(str(exc)) from None
    where = f"{path}" + (f" [{table}]" if table else "")
    entries = data.get(table) if table else data
    if not isinstance(entries, dict):
        raise RegistrationError(f"{where}: missing, or not a table")
    out = {}
    for name, entry in entries.items():
        if not isinstance(entry, dict) or sorted(entry) != sorted(keys):
            raise RegistrationError(f"{where}: entry '{name}' must be a table of {', '.join(keys)}")
        out[name] = {**entry, "value": _sizes(name, entry["value"], f"{where} {name}")}
    return out


def _sizes(key: str, value: Any, where: str) -> Any:
    """``value`` with every ``*_bytes`` string in it (also in nested lists and tables) parsed as a size."""
    if isinstance(value, list):
        return [_sizes(key, item, where) for item in value]
    if isinstance(value, dict):
        return {k: _sizes(k, v, f"{where}.{k}") for k, v in value.items()}
    if key.endswith("_bytes") and isinstance(value, str):
        try:
            return parse_size(value, where)
        except InputError as exc:
            raise RegistrationError(str(exc)) from None
    return value


def read_npy(source: bytes | Path, what: str) -> Any:
    """A .npy array from bytes or a file, never unpickling: the header is parsed and checked
    (object dtype refused, size within the limit, data not truncated) before any data is read."""
    import io
    import tokenize

    import numpy as np

    raw = source if isinstance(source, bytes) else Path(source).read_bytes()
    fh = io.BytesIO(raw)
    try:
        version = np.lib.format.read_magic(fh)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(fh)
    except (ValueError, EOFError, SyntaxError, TypeError, OverflowError, UnicodeDecodeError,
            tokenize.TokenError) as exc:
        raise FormatError(f"{what}: not a valid .npy array ({type(exc).__name__}: {exc})") from None
    if dtype.hasobject:
        raise SecurityError(f"{what}: holds pickled Python objects; refusing to load it")
    count = check_numel(shape, what)
    if len(raw) - fh.tell() < count * dtype.itemsize:
        raise FormatError(f"{what}: truncated (shape {list(shape)} of {dtype} needs {count * dtype.itemsize} bytes "
                          f"of data)")
    array = np.frombuffer(raw, dtype=dtype, count=count, offset=fh.tell())
    return array.reshape(shape, order="F" if fortran else "C").copy(order="K")  # a Fortran file stays F-ordered
