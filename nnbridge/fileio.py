"""Safe file handling shared by every converter: atomic writes, path and size limits."""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import tomllib
from collections.abc import Iterator, Sequence
from pathlib import Path

from .errors import InputError, SecurityError, ShapeError

#: Largest tensor (in elements) nnbridge will allocate from a file's declaration.
#: Overridable with NNBRIDGE_MAX_ELEMENTS for users with very large models.
MAX_ELEMENTS = int(os.environ.get("NNBRIDGE_MAX_ELEMENTS", 4 * 1024**3))


def check_numel(dims: Sequence[int], what: str) -> int:
    """Refuse negative or absurdly large declared shapes before allocating anything."""
    if any(d < 0 for d in dims):
        raise ShapeError(f"{what}: negative dimension in shape {list(dims)}")
    n = math.prod(dims)
    if n > MAX_ELEMENTS:
        raise ShapeError(
            f"{what}: declared shape {list(dims)} has {n:.3g} elements, over the limit "
            f"of {MAX_ELEMENTS:.3g} (set NNBRIDGE_MAX_ELEMENTS to raise it)"
        )
    return n


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


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "wb") -> Iterator:
    """Write to a temporary file beside ``path`` and rename it into place on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    _default_permissions(tmp)
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_outputs(paths: Sequence[str | Path]) -> Iterator[list[Path]]:
    """For writers with several files: yields temp paths, renames all on success."""
    finals = [Path(p) for p in paths]
    temps = []
    for p in finals:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
        os.close(fd)
        _default_permissions(tmp)
        temps.append(Path(tmp))
    try:
        yield temps
        for tmp, final in zip(temps, finals):
            os.replace(tmp, final)
    except BaseException:
        for tmp in temps:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise


def read_toml(path: str | Path, what: str) -> dict:
    """A TOML file's table, or one InputError line naming ``what`` and the file."""
    try:
        return tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise InputError(f"cannot read {what} '{path}': {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{what} '{path}' is not valid TOML: {exc}") from None
