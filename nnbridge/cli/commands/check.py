"""nnbridge check MODEL — backend vs onnxruntime, one row per output."""

from __future__ import annotations

import json

from ..common import (
    add_backend_args,
    add_input_args,
    add_model_args,
    add_parser,
    backend_options,
    chosen_passes,
    load_inputs,
    load_model_from_args,
    parse_dims,
)


def register(sub) -> None:
    p = add_parser(sub, "check", "cross-check a backend against onnxruntime", """\
  nnbridge check model.onnx                         # reference backend, generated inputs
  nnbridge check model.onnx --backend smv           # fp16 SMV simulation vs onnxruntime
  nnbridge check model.onnx --dim batch=4 --seed 3 --json
  nnbridge check lenet_topo.pbtxt --backend smv     # SMAUG model (exported to ONNX for the oracle)
  nnbridge check model.onnx --debug-passes --opt-level 3   # oracle after every pass: which one broke it?
exit status: 0 when every output agrees within tolerance, 1 otherwise.
""")
    add_model_args(p)
    add_backend_args(p)
    add_input_args(p)
    p.add_argument("--rtol", type=float, help="relative tolerance (default: the backend's)")
    p.add_argument("--atol", type=float, help="absolute tolerance (default: the backend's)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--debug-passes", action="store_true",
                   help="run the oracle after every pass of the pipeline (on the reference backend) "
                        "and name the first pass that changed the outputs")
    p.set_defaults(func=run)


def run(args) -> int:
    import nnbridge

    from .. import console

    model = args.model if args.model.lower().endswith(".onnx") else load_model_from_args(args)
    if args.debug_passes:
        return _debug_passes(args, model)
    result = nnbridge.check(model, backend=args.backend, inputs=load_inputs(args.input),
                            rtol=args.rtol, atol=args.atol, seed=args.seed, dims=parse_dims(args.dim),
                            passes=chosen_passes(args, args.backend), opt_level=args.opt_level,
                            **backend_options(args))
    if args.json:
        console.print_json(json.dumps(result.to_dict()))
        return 0 if result.ok else 1
    from rich.table import Table

    table = Table(title=f"{result.model}: {args.backend} vs onnxruntime")
    for col in ("output", "shape", "max abs err", "max rel err", "tolerance", "verdict"):
        table.add_column(col)
    for o in result.outputs:
        verdict = "[green]agree[/]" if o.ok else f"[red]DIFFER[/] {o.note}"
        table.add_row(o.name, "x".join(map(str, o.shape)) or "scalar", f"{o.max_abs_err:.3g}",
                      f"{o.max_rel_err:.3g}", f"rtol {o.rtol:g} atol {o.atol:g}", verdict)
    console.print(table)
    return 0 if result.ok else 1


def _debug_passes(args, model) -> int:
    from rich.table import Table

    from ...passes.debug import debug_passes
    from .. import console

    result = debug_passes(model, chosen_passes(args, args.backend), inputs=load_inputs(args.input),
                          seed=args.seed, dims=parse_dims(args.dim),
                          **{k: v for k, v in (("rtol", args.rtol), ("atol", args.atol)) if v is not None})
    if args.json:
        from dataclasses import asdict

        console.print_json(json.dumps({"model": result.model, "culprit": result.culprit,
                                       "steps": [asdict(s) for s in result.steps]}))
        return 0 if result.culprit is None else 1
    table = Table(title=f"{result.model}: oracle after every pass (reference backend)")
    for col in ("after", "changed", "nodes", "max abs err", "verdict"):
        table.add_column(col)
    for step in result.steps:
        verdict = "[green]agree[/]" if step.ok else f"[red]DIFFER[/] {step.error}"
        table.add_row(step.name, "yes" if step.changed else "", str(step.nodes), f"{step.max_abs_err:.3g}", verdict)
    console.print(table)
    if result.culprit is None:
        console.print("every pass kept the outputs")
        return 0
    console.print(f"first change of outputs: [bold red]{result.culprit}[/]")
    return 1
