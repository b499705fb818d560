"""The ``nnbridge`` command. Each subcommand is one module in ``commands/``.

A command module defines ``register(subparsers)`` (adds its parser, with examples
in the epilog, and sets ``func``). Every ``NNBridgeError`` is printed as one line
without a traceback and exits 1; usage errors (``UsageError``: a flag, ``--set`` key,
input name or value the command, backend or model does not take) exit 2; anything else is a bug in
nnbridge, printed as one "internal error" line (exit 3) that says how to see the
traceback (``NNBRIDGE_TRACEBACK=1``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import shlex
import sys
import warnings
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ..api.threads import cpu_threads
from ..base.errors import NNBridgeError, NNBridgeWarning, OptionError, UnsupportedOpError, UsageError

#: markup off: names, paths and messages come from models and users, so "[...]" must print as
#: written (styled parts are ``rich.text.Text`` pieces, see ``common.styled``)
#: piped output is not wrapped at 80 columns: tables keep whole names and numbers
_WIDTH = None if sys.stdout.isatty() else 250
console = Console(highlight=False, markup=False, width=_WIDTH)
err_console = Console(stderr=True, highlight=False)

#: the global size limits, by flag (with its help): each sets ``fileio.LIMITS`` for one command
_LIMIT_FLAGS = {
    "--max-memory": "memory budget, e.g. 8G: no tensor a file declares may take more than a quarter of it "
                    "(default: physical memory or the process's address-space limit)",
    "--max-output-bytes": "refuse to write more than this, e.g. 2G (default: the free space of the destination's "
                          "disk)",
}

#: the order commands appear in `nnbridge --help`
_ORDER = ["convert", "port", "run", "check", "train", "summary", "ir", "ops", "simulate", "compile",
          "measure_performance", "measure_sections", "sweep", "sweep_report"]


class Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors (a misspelt flag, a missing value) are one line, exit 2,
    like every other refusal of what a command does not take (subcommands' parsers are of this class too)."""

    def error(self, message: str):
        raise OptionError(f"{self.prog}: {message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    from ..base.version import __version__

    parser = Parser(
        prog="nnbridge",
        description="Convert models between ONNX, SMAUG and LBANN; run them on a numpy "
                    "reference backend and on SMV / RDU accelerator simulators; cross-check "
                    "every result against onnxruntime.",
        epilog="Run 'nnbridge COMMAND --help' for the options and examples of each command.",
    )
    parser.add_argument("--version", action="version", version=f"nnbridge {__version__}")
    for flag, text in _LIMIT_FLAGS.items():
        parser.add_argument(flag, metavar="SIZE", help=text)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    from . import commands

    names = [m.name for m in pkgutil.iter_modules(commands.__path__)]
    names.sort(key=lambda n: (_ORDER.index(n) if n in _ORDER else len(_ORDER), n))
    for name in names:
        importlib.import_module(f"{commands.__name__}.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from ..base.fileio import LIMITS, Terminated, unwind_on_signals

    previous = dict(LIMITS)
    try:
        with unwind_on_signals():  # SIGTERM/SIGHUP unwind as SIGINT does: temp files are removed
            return _main(argv)
    except Terminated as exc:
        err_console.print(str(exc))
        return 128 + exc.signum
    finally:  # a command's limits end with it (main is also called in-process)
        LIMITS.clear()
        LIMITS.update(previous)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    try:
        args = _parse(parser, argv)
    except UsageError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True, markup=True)
        return 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return _run_command(args)
    except UnsupportedOpError as exc:  # one line per reason
        err_console.print(f"[bold red]error:[/] {escape(exc.headline())}:", soft_wrap=True, markup=True)
        for line in exc.lines():
            err_console.print(f"  {line}", soft_wrap=True, markup=False)
        return 1
    except NNBridgeError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True, markup=True)
        return 2 if isinstance(exc, UsageError) else 1
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130
    except MemoryError:
        err_console.print("[bold red]error:[/] out of memory (try a smaller batch or --perf-only)")
        return 1
    except Exception as exc:  # a bug, not bad input: one line, and the way to the traceback
        if os.environ.get("NNBRIDGE_TRACEBACK"):
            raise
        _print_internal_error(exc, argv)
        return 3


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """The parsed command line; an argument no parser takes is a usage error."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = " ".join(["nnbridge", *([args.command] if getattr(args, "command", None) else [])])
        raise UsageError(f"{command}: unrecognized arguments: {' '.join(extra)} (see '{command} --help')")
    return args


def _run_command(args: argparse.Namespace) -> int:
    """Run the command within its limits and thread budget; nnbridge's own warnings print as one
    line each after it, other warnings as Python shows them."""
    _set_limits(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", NNBridgeWarning)
        with cpu_threads(getattr(args, "threads", None)):
            code = int(args.func(args) or 0)
    for warning in caught:
        if issubclass(warning.category, NNBridgeWarning):
            err_console.print(f"[yellow]warning:[/] {escape(str(warning.message))}", soft_wrap=True, markup=True)
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    return code


def _print_internal_error(exc: Exception, argv: list[str] | None) -> None:
    """One line for a bug: the exception, where it was raised, and how to see the traceback."""
    where = exc.__traceback__
    while where is not None and where.tb_next is not None:
        where = where.tb_next
    site = f" at {Path(where.tb_frame.f_code.co_filename).name}:{where.tb_lineno}" if where else ""
    command = " ".join(shlex.quote(a) for a in ["nnbridge", *(argv if argv is not None else sys.argv[1:])])
    err_console.print(f"[bold red]internal error:[/] {escape(type(exc).__name__)}: {escape(str(exc)[:300])}"
                      f"{escape(site)} — a bug in nnbridge; rerun with NNBRIDGE_TRACEBACK=1 "
                      f"{escape(command)} to see where, and report it", soft_wrap=True, markup=True)


if __name__ == "__main__":
    sys.exit(main())


def _set_limits(args: argparse.Namespace) -> None:
    from ..base.fileio import LIMITS, parse_size

    for flag in _LIMIT_FLAGS:
        key = flag[2:].replace("-", "_")  # argparse's dest, and the LIMITS key fileio reads
        text = getattr(args, key, None)
        if text:
            LIMITS[key] = parse_size(text, flag)

