"""nnbridge summary MODEL — per-node table with shapes, layouts and parameter counts."""

from __future__ import annotations

from ..common import add_model_args, add_parser, load_model_from_args, parse_passes


def register(sub) -> None:
    p = add_parser(sub, "summary", "per-node table: op, inputs, output shapes/dtypes/layouts, params", """\
  nnbridge summary model.onnx
  nnbridge summary resnet_smv_topo.pbtxt
  nnbridge summary model.onnx --passes fold,simplify,fuse     # after passes
""")
    add_model_args(p)
    p.add_argument("--passes", help="comma-separated passes to run first")
    p.set_defaults(func=run)


def run(args) -> int:
    from rich.table import Table

    from ...ir import run_passes
    from .. import console

    graph = load_model_from_args(args)
    passes = parse_passes(args.passes)
    if passes:
        run_passes(graph, passes)
    table = Table(title=f"{graph.name}: {len(graph)} nodes")
    for col in ("name", "op", "inputs", "outputs", "params"):
        table.add_column(col, justify="right" if col == "params" else "left")
    total = 0
    for node in graph.nodes:
        params = sum(int(v.const.size) for v in node.inputs if v is not None and v.const is not None)
        total += params
        ins = ", ".join(v.name if v is not None else "_" for v in node.inputs if v is None or v.const is None)
        outs = ", ".join(str(o.type) for o in node.outputs)
        table.add_row(node.name, node.op, ins, outs, f"{params:,}" if params else "")
    for key, value in graph.metadata.items():
        if key.startswith("nnbridge."):
            table.caption = (table.caption or "") + f"  {key[9:]}: {value}"
    console.print(table)
    console.print(f"total parameters: {sum(a.size for a in graph.initializers.values()):,}  "
                  f"(used by nodes: {total:,})")
    return 0
