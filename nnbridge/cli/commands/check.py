"""nnbridge check MODEL — backend vs onnxruntime (or a .pef vs the reference backend), judged by docs/check.md."""

from __future__ import annotations

import json
import math

from ...base.errors import InputError, OptionError
from .. import common

#: what a compiled program (.pef) does not read: it runs as it was compiled
COMPILED = {"format": "--format", "input_shape": "--input-shape", "dim": "--dim", **common.LBANN_SOURCE_FLAGS,
            "passes": "--passes", "opt_level": "--opt-level", "disable_pass": "--disable-pass",
            "backend_options": "--set", "no_stored_inputs": "--no-stored-inputs"}
#: what --debug-passes does not read: it runs the reference backend after each pass, on whole outputs
DEBUG_PASSES = {"backend_options": "--set", "input_range": "--input-range", "save_inputs": "--save-inputs",
                "no_stored_inputs": "--no-stored-inputs", "allow_nonfinite": "--allow-nonfinite",
                "layerwise": "--layerwise", "against": "--against", "against_backend": "--against-backend",
                "tol": "--tol", "save_outputs": "--save-outputs", "load_outputs": "--load-outputs"}

#: layerwise tables longer than this show only the nodes that matter
FULL_TABLE_ROWS = 40


def register(sub) -> None:
    p = common.add_parser(sub, "check", "cross-check a backend against onnxruntime", """\
  nnbridge check model.onnx                         # reference backend, generated inputs
  nnbridge check model.onnx --backend smv           # fp16 SMV simulation vs onnxruntime
  nnbridge check model.onnx --backend rdu --layerwise   # every node compared: which one diverges?
  nnbridge check bert.onnx --input-range input_ids=0:30522 --save-inputs inputs/
  nnbridge check model.onnx --dim batch=4 --seed 3 --json
  nnbridge check model.onnx --threads 1             # one BLAS thread and one onnxruntime thread
  nnbridge check lenet5_smv_topo.pbtxt --backend smv   # SMAUG model, on the input its params file stores
  nnbridge check model.pef                          # compiled RDU program vs the reference backend
  nnbridge check model.onnx --debug-passes --opt-level 3   # oracle after every pass: which one broke it?
  nnbridge check model.onnx --against model_topo.pbtxt --against-backend smv   # two files, same inputs
  nnbridge check model.onnx --backend smv --save-outputs run1.npz   # later, elsewhere: --load-outputs run1.npz
  nnbridge check model.onnx --tol scores=0.01,1e-6 --metric quantile:0.99
verdicts: one rule per number format (fp32, fp16, bf16), chosen from the model's precision and the
backend's; NaN/inf agree only where both sides have them and the model declares them (docs/check.md).
exit status: 0 when every output agrees, 1 otherwise.
""")
    common.add_model_args(p)
    common.add_backend_args(p)
    common.add_input_args(p)
    common.add_threads_arg(p)
    p.add_argument("--input-range", action="append", metavar="NAME=LO:HI",
                   help="draw input NAME uniformly from [LO, HI) (integers for integer inputs), "
                        "e.g. --input-range ids=0:30522; repeatable")
    p.add_argument("--save-inputs", metavar="DIR", help="write the inputs used as DIR/<name>.npy")
    p.add_argument("--no-stored-inputs", action="store_true",
                   help="SMAUG models: generate inputs instead of using those the params file stores")
    p.add_argument("--allow-nonfinite", action="append", nargs="?", const="*", metavar="OUTPUT",
                   help="declare that OUTPUT (every output if none is named) may hold NaN/inf; they then "
                        "agree where both sides have them at the same positions")
    p.add_argument("--layerwise", action="store_true",
                   help="expose every intermediate on both sides and name the first node that leaves "
                        "tolerance and the first whose own error does")
    p.add_argument("--rtol", type=float, help="replace the table's rule by |a-ref| <= atol + rtol*|ref|")
    p.add_argument("--atol", type=float, help="see --rtol")
    p.add_argument("--tol", action="append", metavar="NAME=RTOL,ATOL",
                   help="for output NAME only, replace the rule by |a-ref| <= ATOL + RTOL*|ref|; repeatable")
    p.add_argument("--metric", default="max", metavar="max|mean|median|quantile:Q",
                   help="which statistic of the per-element error (in units of its bound) must be <= 1 "
                        "(default max: every element within its bound)")
    p.add_argument("--against", metavar="FILE",
                   help="judge the model against another file (any format, or a compiled .pef) instead of "
                        "onnxruntime, on the same inputs (matched by name, else by position); --passes, "
                        "--opt-level and --set apply to the model's side")
    p.add_argument("--against-backend", metavar="BACKEND",
                   help="the backend the --against file runs on (default: reference)")
    p.add_argument("--save-outputs", metavar="FILE.npz",
                   help="write this run's inputs and outputs (and backend, version, rule) to FILE.npz")
    p.add_argument("--load-outputs", metavar="FILE.npz",
                   help="judge this run, on the inputs saved in FILE.npz, against the outputs saved there")
    p.add_argument("--json", action="store_true", help="print the result (every metric) as JSON")
    p.add_argument("--debug-passes", action="store_true",
                   help="run the oracle after every pass of the pipeline (on the reference backend) "
                        "and name the first pass that changed the outputs")
    p.set_defaults(func=run)


def parse_ranges(items: list[str] | None) -> dict[str, tuple[float, float]]:
    """``--input-range NAME=LO:HI`` → {name: (lo, hi)}."""
    ranges = {}
    for name, text in common.parse_assignments(items, "--input-range").items():
        lo, sep, hi = text.partition(":")
        try:
            ranges[name] = (float(lo), float(hi))
        except ValueError:
            sep = ""
        if not sep or not all(math.isfinite(x) for x in ranges.get(name, (math.nan,))):
            raise InputError(f"--input-range {name}={text}: write LO:HI with two finite numbers, e.g. 0:30522")
    return ranges


def parse_tolerances(items: list[str] | None) -> dict[str, tuple[float, float]]:
    """``--tol NAME=RTOL,ATOL`` → {name: (rtol, atol)}."""
    tolerances = {}
    for name, text in common.parse_assignments(items, "--tol").items():
        parts = text.split(",")
        try:
            rtol, atol = (float(x) for x in parts)
        except ValueError:
            rtol = atol = math.nan
        if not (math.isfinite(rtol) and math.isfinite(atol) and rtol >= 0 and atol >= 0):
            raise OptionError(f"--tol {name}={text}: write RTOL,ATOL with two finite numbers >= 0, e.g. 0.01,1e-6")
        tolerances[name] = (rtol, atol)
    return tolerances


def _comparison(args) -> dict:
    """The options of --tol, --metric, --against, --save-outputs and --load-outputs as check() arguments."""
    if args.against_backend and not args.against:
        raise OptionError("--against-backend names the backend of the --against file; give --against FILE too")
    if args.debug_passes and args.metric != "max":
        raise OptionError(f"--metric {args.metric}: not read by --debug-passes (every pass is compared by its rule)")
    return {"tolerances": parse_tolerances(args.tol), "metric": args.metric, "against": args.against,
            "against_backend": args.against_backend or "reference", "save_outputs": args.save_outputs,
            "load_outputs": args.load_outputs}


def run(args) -> int:
    import nnbridge

    comparison = _comparison(args)
    if args.debug_passes:
        return _debug_passes(args)
    program = args.model.lower().endswith(".pef")
    if program and args.backend not in ("reference", "rdu"):
        raise OptionError(f"{args.model} is a compiled RDU program; it runs on rdu, not --backend {args.backend}")
    if program:
        common.refuse_unread(args, f"by a compiled program ({args.model} runs as it was compiled)", COMPILED)
    backend = "rdu" if program else args.backend
    config = {} if program else common.backend_options(args, backend)
    allowed = args.allow_nonfinite or []
    from .. import console

    against = args.against or args.load_outputs or "the oracle"
    with common.working(console, f"checking {args.model} on {backend} against {against}"):
        result = nnbridge.check(
            args.model, backend=backend, inputs=common.load_inputs(args.input), rtol=args.rtol, atol=args.atol,
            **comparison, seed=args.seed, dims=common.parse_dims(args.dim), input_ranges=parse_ranges(args.input_range),
            stored_inputs=not args.no_stored_inputs, nonfinite=True if "*" in allowed else allowed,
            layerwise=args.layerwise, load_options=common.load_options(args),
            **({} if program else {"passes": common.chosen_passes(args, backend), "opt_level": common.opt_level(args),
                                   **config}))
    saved = {}
    if args.save_inputs:
        from ...api.inputs import save_inputs

        saved = save_inputs(result.inputs, args.save_inputs)
    if args.json:
        data = result.to_dict()
        data["saved_inputs"] = {k: str(v) for k, v in saved.items()}
        console.print_json(json.dumps(data))
        return 0 if result.ok else 1
    _print(result, args, saved)
    return 0 if result.ok else 1


def _print(result, args, saved) -> None:
    from .. import console

    console.print(_inputs_table(result))
    console.print(_outputs_table(result))
    if result.origin is not None:
        console.print(common.styled(("NaN/inf:", "bold"), f" {result.origin.describe()}"))
    for note in result.notes:
        console.print(common.styled((f"{result.backend}:", "dim"), f" {note}"))
    if result.layerwise is not None:
        _print_layerwise(result.layerwise, console)
    _print_reproduce(args, saved, console)
    origin = result.origin
    differing = ", ".join(f"'{o.name}'" for o in result.outputs if not o.ok)
    verdict = ("every output agrees", "green") if result.ok else (f"outputs differ: {differing}", "red")
    console.print(common.styled(verdict, f" — first NaN/inf at node '{origin.node}' ({origin.op}, output "
                                         f"'{origin.output}')" if origin else ""))


def _inputs_table(result):
    """Each input's shape, dtype, distribution, seed and range."""
    from rich.table import Table

    table = Table(title="inputs", title_justify="left")
    for col in ("input", "shape", "dtype", "distribution", "seed", "min", "max"):
        table.add_column(col)
    for i in result.input_info:
        table.add_row(i.name, _shape(i.shape), i.dtype, i.distribution, "" if i.seed is None else str(i.seed),
                      _num(i.min), _num(i.max))
    return table


def _outputs_table(result):
    """Each output's errors and verdict; ulps and SQNR for a low-precision model, the metric and the
    rule where they are not the plain ones."""
    from rich.table import Table

    table = Table(title=f"{result.model}: {result.backend} vs {result.oracle} ({result.precision} model)",
                  caption="; ".join(f"rule {r.describe()}" for r in (result.rule, *result.output_rules.values())))
    low = result.rule.format.name != "FLOAT32"
    cols = ["output", "shape", "max abs err", "err/scale", "outside"] + (["ulps", "SQNR dB"] if low else [])
    metric = result.rule.metric != "max"
    rules = any(o.rule not in (result.rule.name, "exact") for o in result.outputs)
    cols += ([f"{result.rule.metric} err/bound"] if metric else []) + (["rule"] if rules else [])
    for col in [*cols, "verdict"]:
        table.add_column(col, overflow="fold")
    for o in result.outputs:
        row = [o.name, _shape(o.shape), _num(o.max_abs_err), _num(o.err_vs_scale), _outside(o)]
        if low:
            row += [_num(o.ulp_err), _num(o.sqnr_db, ".1f")]
        row += ([_num(o.metric_value)] if metric else []) + ([o.rule] if rules else [])
        verdict = common.styled(("agree", "green") if o.ok else ("DIFFER", "red"), f" {o.note}" if o.note else "")
        table.add_row(*row, verdict)
    return table


def _print_reproduce(args, saved, console) -> None:
    """Where the inputs (and outputs) were saved, and the command that reuses them."""
    if saved:
        folder = next(iter(saved.values())).parent
        again = " ".join(f"--input {k}={v}" for k, v in saved.items())
        console.print(f"inputs written to {folder}/ — reproduce with: nnbridge check {args.model} {again}")
    if args.save_outputs:
        console.print(f"inputs and outputs written to {args.save_outputs} — judge another run against them with: "
                      f"nnbridge check {args.model} --load-outputs {args.save_outputs}")


def _print_layerwise(lw, console) -> None:
    from rich.table import Table

    first, culprit = lw.first_divergent, lw.culprit
    rows = lw.shown(FULL_TABLE_ROWS)
    table = Table(title=f"layer by layer ({len(lw.nodes)} nodes compared"
                        + (f", {len(rows)} shown" if len(rows) < len(lw.nodes) else "") + ")")
    for col in ("node", "op", "inputs → output", "err/scale", "outside", "own err/scale", "verdict"):
        table.add_column(col, overflow="fold")
    for n in rows:
        out = n.outputs[0]
        own = _num(max(o.err_vs_scale for o in n.local)) if n.local else "n/a"
        source = n.local and not n.local_ok
        verdict = common.styled(("SOURCE", "red") if source else ("agree", "green") if n.ok else ("drift", "yellow"),
                                f" {n.note}" if n.note else "")
        table.add_row(n.name, n.op, f"{' '.join(_shape(s) for s in n.input_shapes if s is not None)} → "
                      f"{_shape(out.shape)}", _num(max(o.err_vs_scale for o in n.outputs)),
                      _outside(out), own, verdict)
    console.print(table)
    if lw.unexposed:
        console.print(common.styled((f"not returned by the backend: {len(lw.unexposed)} value(s), "
                                     f"e.g. {lw.unexposed[:3]}", "dim")))
    if first is None:
        console.print("every node's output is within tolerance")
    else:
        console.print(common.styled("first node whose output leaves tolerance: ",
                                    (_node(first, first.outputs), "bold red")))
    if culprit is not None:
        console.print(common.styled("first node whose own error leaves tolerance (re-run alone from the backend's "
                                    "inputs): ", (_node(culprit, culprit.local), "bold red")))
    elif first is not None:
        console.print("no node's own error leaves tolerance: the divergence is rounding accumulated through the "
                      "network")


def _node(n, checks) -> str:
    worst = max(checks, key=lambda o: o.err_vs_scale)
    shapes = ", ".join(_shape(s) for s in n.input_shapes if s is not None)
    return (f"{n.name} ({n.op}, inputs {shapes} → {_shape(worst.shape)}): max abs err {_num(worst.max_abs_err)}, "
            f"{_num(100 * worst.err_vs_scale)} % of scale, {_outside(worst)} elements outside")


def _outside(o) -> str:
    return f"{o.outside} ({100 * o.outside_frac:.3g} %)" if o.outside else "0"


def _shape(shape) -> str:
    return "x".join(map(str, shape)) if shape else "scalar"


def _num(x, fmt: str = ".3g") -> str:
    if x is None:
        return ""
    return format(x, fmt) if math.isfinite(x) else str(x)


def _debug_passes(args) -> int:
    from rich.table import Table

    from ...check.pass_debug import debug_passes
    from ...check.verdict import jsonable
    from .. import console

    if args.model.lower().endswith(".pef"):
        raise InputError(f"{args.model}: --debug-passes needs a model, not a compiled program")
    common.refuse_unread(args, "by --debug-passes (the reference backend after each pass of the pipeline)",
                         DEBUG_PASSES)
    backend = args.backend
    onnx_file = args.model.lower().endswith(".onnx")
    if onnx_file:  # the oracle runs the file itself, as the user gave it
        common.refuse_unread(args, "by --debug-passes on an ONNX file (pin dims with --dim)",
                             {"input_shape": "--input-shape"})
    model = args.model if onnx_file else _load(args)
    result = debug_passes(model, common.chosen_passes(args, backend), inputs=common.load_inputs(args.input),
                          seed=args.seed, dims=common.parse_dims(args.dim), rtol=args.rtol, atol=args.atol)
    if args.json:
        from dataclasses import asdict

        steps = [{k: jsonable(v) for k, v in asdict(s).items()} for s in result.steps]
        console.print_json(json.dumps({"model": result.model, "culprit": result.culprit, "steps": steps}))
        return 0 if result.culprit is None else 1
    table = Table(title=f"{result.model}: oracle after every pass (reference backend)")
    for col in ("after", "changed", "nodes", "max abs err", "verdict"):
        table.add_column(col)
    for step in result.steps:
        verdict = common.styled(("agree", "green")) if step.ok else common.styled(("DIFFER", "red"), f" {step.error}")
        table.add_row(step.name, "yes" if step.changed else "", str(step.nodes), f"{step.max_abs_err:.3g}", verdict)
    console.print(table)
    if result.culprit is None:
        console.print("every pass kept the outputs")
        return 0
    console.print(common.styled("first change of outputs: ", (str(result.culprit), "bold red")))
    return 1


def _load(args):
    from ..common import load_model_from_args

    return load_model_from_args(args)
