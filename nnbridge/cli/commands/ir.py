"""nnbridge ir MODEL — print the text IR, optionally after passes."""

from __future__ import annotations

from ..common import add_model_args, add_parser, load_model_from_args, parse_passes


def register(sub) -> None:
    p = add_parser(sub, "ir", "print the text IR of a model", """\
  nnbridge ir model.onnx
  nnbridge ir model.onnx --passes fold,simplify,fuse --print-after
  nnbridge ir model.onnx --backend smv --opt-level 2      # the IR the SMV backend compiles
  nnbridge ir --list-passes x
""")
    add_model_args(p)
    p.add_argument("--passes", help="comma-separated passes to run first")
    p.add_argument("--backend", "-b", help="run this backend's pipeline (with --opt-level) unless --passes is given")
    p.add_argument("--opt-level", type=int, default=1, choices=[0, 1, 2, 3],
                   help="pipeline level for --backend (default 1)")
    p.add_argument("--disable-pass", action="append", metavar="NAME", default=[],
                   help="leave this pass out; repeatable")
    p.add_argument("--print-after", action="store_true", help="print the IR after every pass")
    p.add_argument("--list-passes", action="store_true", help="list the available passes and exit")
    p.set_defaults(func=run)


def run(args) -> int:
    from ...ir import PassManager
    from ...ir.passes import available_passes
    from .. import console

    if args.list_passes:
        for name, info in sorted(available_passes().items()):
            console.print(f"{name:24s} {info.doc}")
        return 0
    graph = load_model_from_args(args)
    passes = parse_passes(args.passes)
    if passes is None and args.backend:
        from ...backends import get_backend

        passes = get_backend(args.backend).pipeline(args.opt_level)
    if args.disable_pass:
        from ...passes.pipelines import select_passes

        passes = select_passes(args.backend or "reference", args.opt_level, passes, args.disable_pass)
    if passes:
        PassManager(passes, print_after=args.print_after, printer=lambda s: console.print(s, markup=False)).run(graph)
    if not args.print_after or not passes:
        console.print(str(graph), markup=False, soft_wrap=True)
    return 0
