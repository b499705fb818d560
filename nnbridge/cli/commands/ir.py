"""nnbridge ir MODEL — print the text IR, optionally after passes."""

from __future__ import annotations

from ..common import add_model_args, add_parser, add_pass_args, chosen_passes, load_model_from_args


def register(sub) -> None:
    p = add_parser(sub, "ir", "print the text IR of a model", """\
  nnbridge ir model.onnx
  nnbridge ir model.onnx --passes fold,simplify,fuse --print-after
  nnbridge ir model.onnx --backend smv --opt-level 2      # the IR the SMV backend compiles
  nnbridge ir --list-passes x
""")
    add_model_args(p)
    p.add_argument("--backend", "-b", help="run this backend's pipeline (with --opt-level) unless --passes is given")
    add_pass_args(p)
    p.add_argument("--print-after", action="store_true", help="print the IR after every pass")
    p.add_argument("--list-passes", action="store_true", help="list the available passes and exit")
    p.set_defaults(func=run)


def run(args) -> int:
    from ...passes import PassManager, available_passes
    from .. import console

    if args.list_passes:
        for name, info in sorted(available_passes().items()):
            console.print(f"{name:24s} {info.doc}")
        return 0
    graph = load_model_from_args(args)
    passes = chosen_passes(args, args.backend)
    if passes:
        PassManager(passes, print_after=args.print_after, printer=lambda s: console.print(s, markup=False)).run(graph)
    if not args.print_after or not passes:
        console.print(str(graph), markup=False, soft_wrap=True)
    return 0
