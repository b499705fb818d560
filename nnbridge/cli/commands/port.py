"""nnbridge port MODEL — where a model can go, what must change, whether the numbers hold, what it costs."""

from __future__ import annotations

import sys

from .. import common


def register(sub) -> None:
    p = common.add_parser(sub, "port", "one table: can the model go to SMAUG, LBANN or the RDU, how well, at what "
                                       "cost", """\
  nnbridge port model.onnx                              # every target: smaug-ref, smaug-smv, lbann, rdu
  nnbridge port bert.onnx --dim batch=1 --dim sequence=128   # pins, once for every target
  nnbridge port det.onnx --input-shape image=1x3x640x640 --targets lbann,rdu
  nnbridge port model.onnx --html port.html --json port.json  # the table as a page, each target's report linked
  nnbridge port model.onnx --out-dir files --keep       # also keep the files it validated where the commands write
""", description="For each target: converts? (yes / with rewrites, counted per op / no, one line per reason and "
                 "what would help); numerics (the converted file on the target's simulator or reference backend "
                 "against onnxruntime on the source, the rule, the first node that overflows or diverges); cost "
                 "(SMV latency and its compute/transfer/CPU split; RDU throughput at batch 1 and at a "
                 "compute-bound batch, sections, memory tiers); size; and the commands that write the files, "
                 "each already run and checked. Dynamic dims are pinned once for every target (on a terminal, "
                 "port asks for them).")
    p.add_argument("model", help="model file: .onnx, SMAUG <name>_topo.pbtxt, LBANN .prototext")
    common.add_shape_args(p)
    p.add_argument("--targets", metavar="T,T,…",
                   help="which targets, of smaug-ref, smaug-smv, lbann, rdu (default: all four)")
    p.add_argument("--seed", type=int, default=0, help="seed of the inputs every target runs on (default 0)")
    p.add_argument("--out-dir", default="out", metavar="DIR",
                   help="where the suggested commands write their files (default: out)")
    p.add_argument("--keep", action="store_true",
                   help="write the files port converted and checked into --out-dir (by default they are discarded "
                        "and the commands write them)")
    p.add_argument("--html", metavar="FILE.html",
                   help="write the table as one page, and the SMV and RDU reports beside it, linked")
    common.add_json_arg(p, "the report")
    p.set_defaults(func=run)


def run(args) -> int:
    from .. import console

    report = _port(args, console)
    written = []
    if args.html:
        from ...port.html import write_html

        written = write_html(report, args.html)
    if args.json:
        common.write_json(report.to_dict(), args.json)
        if args.json == "-":
            return 0
    _print_table(console, report)
    _print_pins(console, report)
    if args.keep:
        kept = [f for t in report.targets for f in t.conversion.files]
        console.print(f"kept {len(kept)} validated file(s) in {args.out_dir}/")
    for path in written:
        console.print(f"HTML written to {path}")
    if args.json:
        console.print(f"JSON written to {args.json}")
    return 0


def _port(args, console):
    """The port report of the model for the targets asked, with a spinner on a terminal, where
    unpinned dimensions are asked for (the spinner stops while a question waits for its answer)."""
    from ...port import parse_targets, port

    targets = parse_targets(args.targets)
    options = common.load_options(args)
    dims, shapes = options.pop("dims", None), options.pop("input_shapes", None)
    with _status(console) as status:
        def ask(values):
            if status is not None:
                status.stop()
            try:
                return _ask(values)
            finally:
                if status is not None:
                    status.start()

        say = None if status is None else (lambda text: status.update(f"port: {text}"))
        return port(args.model, targets, dims=dims, input_shapes=shapes, seed=args.seed, out_dir=args.out_dir,
                    keep=args.keep, ask=ask if sys.stdin.isatty() and console.is_terminal else None,
                    progress=say, load_options=options)


def _print_table(console, report) -> None:
    """The table, a row per target, then its commands printed whole (where they can be copied),
    numbered as the table's last column refers to them."""
    from rich.table import Table

    from ...port.report import COLUMNS

    table = Table(title=f"nnbridge port: {report.model}", show_lines=True)
    for col in COLUMNS:
        table.add_column(col, overflow="fold")
    commands = []
    for row in report.targets:
        *cells, _ = row.cells()
        refs = []
        for command in row.commands:
            commands.append(command)
            refs.append(f"[{len(commands)}] {' '.join(command.split()[:2])} …")
        table.add_row(*(_styled(cell) for cell in cells), "\n".join(refs))
    console.print(table)
    console.print("next (each command that writes a file was run and its file checked by port):")
    for n, command in enumerate(commands, 1):
        console.print(f"  [{n}] {command}", highlight=False, soft_wrap=True)


def _print_pins(console, report) -> None:
    """The dimensions pinned for every target, the inputs drawn, and the time port took."""
    pins = [*(f"--dim {k}={v}" for k, v in report.dims.items()),
            *(f"--input-shape {k}={'x'.join(map(str, v))}" for k, v in report.input_shapes.items())]
    console.print(f"pinned for every target: {' '.join(pins) or 'nothing (static inputs)'}; inputs: "
                  + "; ".join(f"{i['name']} {'x'.join(map(str, i['shape']))} {i['dtype']} {i['distribution']}"
                              for i in report.inputs) + f"; {report.seconds:,.1f} s", highlight=False)


#: a cell's first word → its colour
_TONES = {"yes": "green", "with rewrites": "yellow", "no": "red", "agree": "green", "DIFFER": "red",
          "not run": "dim"}


def _styled(cell: str):
    lead, newline, rest = cell.partition("\n")
    tone = next((c for w, c in _TONES.items() if lead == w or lead.startswith((w + ":", w + " on"))), None)
    return common.styled((lead, tone) if tone else lead, newline + rest)


def _status(console):
    """On a terminal: a spinner saying what port is doing (None when piped: quiet)."""
    import contextlib

    if not console.is_terminal:
        return contextlib.nullcontext(None)
    return console.status("port: reading the model")


def _ask(values) -> tuple[dict[str, int], dict[str, tuple[int, ...]]]:
    """Ask on the terminal for each symbolic dim (once, whatever inputs share it) and for the whole
    shape of an input with an unnamed dim; an answer that is not a size is refused in one line."""
    from ...base.errors import InputError
    from .. import console

    dims: dict[str, int] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    for value in values:
        shape = value.type.shape
        shown = "[" + ", ".join("?" if d is None else str(d) for d in shape or ()) + "]"
        if shape is None or any(d is None for d in shape):
            text = console.input(f"shape of input '{value.name}' {shown} (like 1x3x224x224): ").strip()
            try:
                shapes[value.name] = tuple(int(d) for d in text.lower().split("x"))
            except ValueError:
                raise InputError(f"shape of '{value.name}': '{text}' is not like 1x3x224x224") from None
            continue
        for dim in shape:
            if isinstance(dim, str) and dim not in dims:
                text = console.input(f"value of dim '{dim}' (input '{value.name}' {shown}): ").strip()
                if not text.isdigit() or int(text) < 1:
                    raise InputError(f"dim '{dim}': '{text}' is not a positive integer")
                dims[dim] = int(text)
    return dims, shapes
