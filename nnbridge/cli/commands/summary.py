"""nnbridge summary MODEL — inputs and outputs, op histogram, parameters, FLOPs, and a per-node table."""

from __future__ import annotations

from .. import common


def register(sub) -> None:
    p = common.add_parser(sub, "summary", "per-node table: op, inputs, output shapes/dtypes/layouts, params", """\
  nnbridge summary model.onnx
  nnbridge summary resnet_smv_topo.pbtxt
  nnbridge summary model.onnx --passes fold,simplify,fuse     # after passes
  nnbridge summary model.onnx --opt-level 2                   # after the reference pipeline
  nnbridge summary lenet5_smv_topo.pbtxt --style smaug        # SMAUG's own print_summary() text
  nnbridge summary model.onnx --json - | jq .inputs            # the header as JSON on stdout
The header lists the inputs and outputs (name, dtype, shape, layout), the op histogram, the
parameters and the FLOP of one run (2 per multiply-accumulate). The footer lists the fused
groups (kernels) and the planned peak activation memory.
""")
    common.add_model_args(p)
    p.add_argument("--backend", "-b", help="run this backend's pipeline first, at --opt-level (--opt-level or "
                                           "--disable-pass alone: the reference backend's)")
    p.add_argument("--style", choices=["table", "smaug"], default="table",
                   help="smaug: the text SMAUG's frontend print_summary() prints (SMAUG files only)")
    p.add_argument("--json", metavar="FILE", help="write the header (inputs, outputs, ops, parameters, FLOP) as "
                                                 "JSON to FILE ('-': standard output) instead of the tables")
    common.add_pass_args(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ...passes import run_passes
    from .. import console

    if args.style == "smaug":
        console.file.write(_smaug_summary(args))
        return 0
    graph = common.load_model_from_args(args)
    passes = common.chosen_passes(args, args.backend)
    if passes:
        run_passes(graph, passes)
    header = model_header(graph)
    if args.json:
        common.write_json(header, args.json)
        return 0
    _print_header(header, console)
    console.print(_node_table(graph))
    _print_kernels_and_memory(graph, console)
    return 0


def _smaug_summary(args) -> str:
    """SMAUG's own print_summary() text of a topology file, as written (no option that changes
    the graph applies)."""
    from ...base.errors import InputError
    from ...converters.smaug.files import TOPO_SUFFIX
    from ...smaug.summary import file_summary

    common.refuse_unread(args, "with --style smaug (SMAUG's own summary of the file as written)",
                         {"backend": "--backend", "passes": "--passes", "opt_level": "--opt-level",
                          "disable_pass": "--disable-pass", "json": "--json", "format": "--format",
                          "input_shape": "--input-shape", "dim": "--dim"})
    if not args.model.endswith(TOPO_SUFFIX):
        raise InputError(f"--style smaug prints a SMAUG topology's summary; '{args.model}' is not a "
                         f"*{TOPO_SUFFIX} file")
    return file_summary(args.model)


def _node_table(graph):
    """One row per node: its name, op, non-constant inputs, output types and parameter count; the
    graph's nnbridge metadata in the caption."""
    from rich.table import Table

    from ...ir.stats import parameter_values

    table = Table(title=f"{graph.name}: {len(graph)} nodes")
    for col in ("name", "op", "inputs", "outputs", "params"):
        table.add_column(col, justify="right" if col == "params" else "left")
    sizes = parameter_values(graph)
    for node in graph.nodes:
        read = {v.name for v in node.inputs if v is not None}
        params = sum(sizes[name][0] for name in read if name in sizes)
        ins = ", ".join(v.name if v is not None else "_" for v in node.inputs if v is None or v.const is None)
        outs = ", ".join(str(o.type) for o in node.outputs)
        table.add_row(node.name, node.op, ins, outs, f"{params:,}" if params else "")
    for key, value in graph.metadata.items():
        if key.startswith("nnbridge."):
            table.caption = (table.caption or "") + f"  {key[9:]}: {value}"
    return table


def _print_kernels_and_memory(graph, console) -> None:
    """Fused groups (those in the graph, else those `fuse` would form) and the memory plan."""
    from ...passes.fuse import partition
    from ...passes.plan_memory import plan_memory

    fused = [n for n in graph.nodes if n.op == "Fused" and n.domain == "nnbridge"]
    if fused:
        groups = [[m.op for m in n.attr("body").nodes] for n in fused]
        console.print(f"kernels: {len(graph)} ({len(fused)} fused groups)")
    else:
        groups = [[m.op for m in g] for g in partition(graph) if len(g) > 1]
        console.print(f"kernels: {len(graph)} nodes; fusion would make "
                      f"{len(graph) - sum(len(g) - 1 for g in groups)} kernels ({len(groups)} fused groups)")
    for ops in groups[:20]:
        console.print(f"  fused: {' + '.join(ops)}", markup=False)
    if len(groups) > 20:
        console.print(f"  … and {len(groups) - 20} more")
    plan = plan_memory(graph)
    if plan.unshared_bytes:
        console.print(f"peak activation memory: {plan.total_bytes:,} bytes in {len(plan.storage_bytes)} buffers "
                      f"(unshared {plan.unshared_bytes:,}; live lower bound {plan.live_peak_bytes:,}; "
                      f"{len(plan.inplace)} in place)")


def model_header(graph) -> dict:
    """What users look for first: the model's inputs and outputs, its ops, its size and its work."""
    from collections import Counter

    from ...backends.rdu.costs import op_cost
    from ...ir.stats import parameters

    flops, unknown = 0.0, 0
    count, nbytes = parameters(graph)
    for node in graph.nodes:
        cost = op_cost(node, 4)
        flops += cost.flops
        unknown += cost.unknown_shapes
    return {"model": graph.name, "inputs": [common.value_json(v) for v in graph.inputs],
            "outputs": [common.value_json(v) for v in graph.outputs],
            "ops": dict(Counter(n.op for n in graph.nodes).most_common()), "nodes": len(graph),
            "parameters": count, "parameter_bytes": nbytes,
            "flop": flops, "values_of_unknown_shape": unknown}


def _print_header(header: dict, console) -> None:
    from rich.table import Table

    table = Table(title=f"{header['model']}: inputs and outputs")
    for col in ("", "name", "dtype", "shape", "layout"):
        table.add_column(col)
    for kind in ("inputs", "outputs"):
        for v in header[kind]:
            dims = v["shape"]
            shape = "?" if dims is None else "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
            table.add_row(kind[:-1], v["name"], v["dtype"] or "?", shape, v["layout"])
    console.print(table)
    ops = ", ".join(f"{op} {n}" for op, n in header["ops"].items())
    console.print(f"ops ({header['nodes']} nodes): {ops}")
    flop = f"{header['flop'] / 1e6:,.1f} MFLOP per run (2 per multiply-accumulate)"
    if header["values_of_unknown_shape"]:
        flop += f"; {header['values_of_unknown_shape']} values of unknown shape not counted"
    console.print(f"{header['parameters']:,} parameters, {header['parameter_bytes'] / 2**20:,.2f} MiB; {flop}")
