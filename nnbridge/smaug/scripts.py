"""Run a script written for SMAUG's frontend (``import smaug as sg``) unmodified, with ``smaug``
meaning ``nnbridge.smaug``: ``python -m nnbridge.smaug script.py [args]``."""

from __future__ import annotations

import os
import runpy
import sys
from contextlib import contextmanager
from pathlib import Path

from ..base.errors import NNBridgeError


@contextmanager
def as_smaug():
    """``import smaug`` gives ``nnbridge.smaug`` inside this block."""
    from .. import smaug

    saved = sys.modules.get("smaug")
    sys.modules["smaug"] = smaug
    try:
        yield smaug
    finally:
        if saved is None:
            del sys.modules["smaug"]
        else:
            sys.modules["smaug"] = saved


def run_script(path: str | os.PathLike, args: list[str] | None = None) -> dict:
    """Run ``path`` as ``__main__`` (with ``sys.argv`` = [path, *args]); returns its globals."""
    saved_argv = sys.argv
    sys.argv = [os.fspath(path), *(args or [])]
    try:
        with as_smaug():
            return runpy.run_path(os.fspath(path), run_name="__main__")
    finally:
        sys.argv = saved_argv


def run_source(source: str, what: str = "<smaug script>") -> dict:
    """Run script text (e.g. a tutorial's code) as ``__main__``; returns its globals."""
    scope = {"__name__": "__main__", "__file__": what}
    with as_smaug():
        exec(compile(source, what, "exec"), scope)  # noqa: S102 - the user's own script, as `python script.py` would
    return scope


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m nnbridge.smaug SCRIPT.py [ARGS...]\n"
              "Runs a script written for SMAUG's Python frontend (import smaug as sg) with nnbridge.smaug.")
        return 0 if argv else 2
    script = Path(argv[0])
    if not script.is_file():
        print(f"error: {script}: no such script", file=sys.stderr)
        return 2
    sys.path.insert(0, str(script.resolve().parent))
    try:
        run_script(script, argv[1:])
    except NNBridgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
