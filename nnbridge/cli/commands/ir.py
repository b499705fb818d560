"""nnbridge ir MODEL — print the text IR, optionally after passes."""

from __future__ import annotations

from .. import common


def register(sub) -> None:
    p = common.add_parser(sub, "ir", "print the text IR of a model", """\
  nnbridge ir model.onnx
  nnbridge ir model.onnx --passes fold,simplify,fuse --print-after
  nnbridge ir model.onnx --backend smv --opt-level 2      # the IR the SMV backend compiles
  nnbridge ir --list-passes x
""")
    common.add_model_args(p)
    p.add_argument("--backend", "-b", help="run this backend's pipeline at --opt-level unless --passes is given "
                                           "(--opt-level or --disable-pass alone: the reference backend's)")
    common.add_pass_args(p)
    p.add_argument("--print-after", action="store_true", help="print the IR after every pass")
    p.add_argument("--list-passes", action="store_true", help="list the available passes and exit")
    common.add_json_arg(p, "the graph (inputs, outputs, nodes with attributes and output types) after the passes")
    p.set_defaults(func=run)


def run(args) -> int:
    from ...passes import PassManager, available_passes
    from .. import console

    if args.list_passes:
        for name, info in sorted(available_passes().items()):
            console.print(f"{name:24s} {info.doc}")
        return 0
    passes = common.chosen_passes(args, args.backend)
    if not passes:
        common.refuse_unread(args, "without passes (give --passes, --backend or --opt-level)",
                             {"print_after": "--print-after"})
    graph = common.load_model_from_args(args)
    if passes:
        quiet = args.json == "-"
        PassManager(passes, print_after=args.print_after and not quiet,
                    printer=lambda s: console.print(s, markup=False)).run(graph)
    if args.json:
        common.write_json(graph_json(graph), args.json)
        if args.json == "-":
            return 0
    if not args.print_after or not passes:
        console.print(str(graph), markup=False, soft_wrap=True)
    return 0


def graph_json(graph) -> dict:
    """The IR as data: what ``str(graph)`` prints, structured (constants by shape and dtype only)."""
    def attr(a):
        if hasattr(a, "shape") and hasattr(a, "dtype"):
            return {"tensor": {"shape": list(a.shape), "dtype": str(a.dtype)}}
        if hasattr(a, "nodes") and hasattr(a, "inputs"):
            return graph_json(a)
        if isinstance(a, list) and a and hasattr(a[0], "nodes"):
            return [graph_json(g) for g in a]
        return a

    constants = {name: {"shape": list(a.shape), "dtype": str(a.dtype)} for name, a in graph.initializers.items()}
    return {"name": graph.name, "inputs": [common.value_json(v) for v in graph.inputs],
            "outputs": [common.value_json(v) for v in graph.outputs], "initializers": constants,
            "nodes": [{"name": n.name, "op": n.op, "domain": n.domain,
                       "inputs": [v.name if v is not None else None for v in n.inputs],
                       "outputs": [common.value_json(o) for o in n.outputs],
                       "attrs": {k: attr(a) for k, a in n.attrs.items()}} for n in graph.nodes]}
