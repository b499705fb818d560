"""nnbridge compile MODEL --backend rdu — write a compiled artifact (PEF)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ...errors import InputError
from ..common import add_backend_args, add_model_args, add_parser, backend_options, parse_passes, working


def register(sub) -> None:
    p = add_parser(sub, "compile", "compile a model for the RDU simulator into a .pef artifact", """\
  nnbridge compile model.onnx --backend rdu                      # writes model.pef (sn40l, o1)
  nnbridge compile model.onnx --backend rdu -o out/model.pef --mode o0 --preset plasticine
  nnbridge compile model.onnx --backend rdu --batch-size 16 --set reconfig_us=5
  nnbridge compile digits_cnn.onnx --backend rdu --optimizer sgd --lr 0.05 --batch-size 32   # a training step
  nnbridge measure-performance digits_cnn.pef      # training throughput, fwd / bwd / opt split
""")
    add_model_args(p)
    add_backend_args(p, default="rdu")
    add_rdu_args(p)
    p.add_argument("--output", "-o", help="artifact path (default: MODEL with the suffix .pef)")
    p.set_defaults(func=run)


def add_rdu_args(p: argparse.ArgumentParser) -> None:
    """Compile-time options of the RDU simulator, shared by compile and measure-* commands."""
    p.add_argument("--preset", default="sn40l", help="chip: plasticine, sn10 or sn40l (default sn40l)")
    p.add_argument("--mode", default="o1", choices=["o0", "o1"],
                   help="o0: one operator per section; o1: fusion + resource-driven sections (default)")
    p.add_argument("--batch-size", "-B", type=int,
                   help="samples per run (default 1, or the batch a .pef was compiled for)")
    p.add_argument("--micro-batch", type=int, help="samples per pipeline token (default: the compiler's "
                   "choice, the fastest whose tokens fit on chip)")
    p.add_argument("--allow-overcommit", action="store_true",
                   help="price a model whose weights exceed the last off-chip tier instead of refusing it")
    p.add_argument("--config", metavar="FILE.toml", help="machine parameters from a TOML file ([rdu] table or "
                   "top level; the names --set takes, tiers as hbm_bw_gbps …); --set overrides them")
    serving = p.add_argument_group("LLM serving (MODEL = llama-3.1-8b, llama-3.1-70b or llama-3.1-405b: "
                                   "weights as shapes only)")
    serving.add_argument("--phase", choices=["decode", "prefill"], default="decode",
                         help="one decode step over the KV cache, or the prompt's prefill (default decode)")
    serving.add_argument("--context", type=int, default=4096, help="cached tokens a decode step reads (4096)")
    serving.add_argument("--prompt", type=int, default=128, help="prompt tokens of a prefill (128)")
    serving.add_argument("--sockets", type=int, default=1,
                         help="tensor-parallel sockets; the estimate is one socket's, AllReduce on the links (1)")
    training = p.add_argument_group("training (SambaFlow's fwd, bwd and opt sections)")
    training.add_argument("--optimizer", choices=["sgd", "adam", "adamw"],
                          help="compile one training step: forward and loss, backward, and this optimizer "
                               "(default: --inference, the forward pass only)")
    training.add_argument("--inference", action="store_true", help="compile the forward pass only (the default)")
    training.add_argument("--loss", default="cross-entropy", choices=["cross-entropy", "mse"],
                          help="the training loss (default: cross-entropy on the model's scores)")
    training.add_argument("--lr", type=float, default=0.05, help="learning rate, fixed at compile time (0.05)")
    training.add_argument("--momentum", type=float, default=0.9, help="SGD momentum (0.9)")
    training.add_argument("--weight-decay", type=float, default=0.0, help="L2 weight decay (0)")


def machine_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """``--set`` machine parameters (e.g. reconfig_us=5, n_pmu=none): numbers, or none for unbounded."""
    out = _machine_file(args.config) if getattr(args, "config", None) else {}
    out.update(backend_options(args))
    for key, value in out.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise InputError(f"--set {key}={value}: a machine parameter must be a number or 'none'")
    return out


def llm_graph_from_args(args: argparse.Namespace):
    """The zoo's Llama graph when MODEL names one (and no such file exists), else None."""
    from ...zoo.llm import LLAMA_3_1, llama_config, llama_graph

    names = [c.name for c in LLAMA_3_1.values()]
    if args.model.lower() not in names or Path(args.model).exists():
        if getattr(args, "sockets", 1) != 1:
            raise InputError(f"--sockets applies to the zoo's LLMs ({', '.join(names)}), not to '{args.model}'")
        return None
    return llama_graph(llama_config(args.model), phase=args.phase, context=args.context, prompt=args.prompt,
                       sockets=args.sockets)


def _machine_file(path: str) -> dict[str, Any]:
    """The ``[rdu]`` table (or the top level) of a TOML file: machine parameter → number or "none"."""
    from ...fileio import read_toml

    table = read_toml(path, "RDU machine file", "rdu")
    return {key: None if value == "none" else value for key, value in table.items()}


def compile_from_args(args: argparse.Namespace):
    """The RDU executable for MODEL (compiled) or for a .pef (loaded as stored)."""
    import nnbridge

    from ...backends.rdu import load_pef
    from ..common import load_model_from_args

    if args.model.lower().endswith(".pef"):
        return load_pef(args.model)
    if getattr(args, "backend", "rdu") != "rdu":
        raise InputError(f"only the rdu backend has compiled artifacts (got --backend {args.backend})")
    graph = llm_graph_from_args(args) or load_model_from_args(args)
    if getattr(args, "optimizer", None):
        from ...training import compile_training

        if args.inference:
            raise InputError("--inference and --optimizer exclude each other: a program is one or the other")
        return compile_training(graph, batch_size=1 if args.batch_size is None else args.batch_size,
                                loss=args.loss, optimizer=args.optimizer, lr=args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay, opt_level=getattr(args, "opt_level", 1),
                                mode=args.mode, preset=args.preset,
                                micro_batch=args.micro_batch, allow_overcommit=args.allow_overcommit,
                                **machine_overrides(args))
    return nnbridge.compile(graph, backend="rdu", passes=parse_passes(getattr(args, "passes", None)),
                            opt_level=getattr(args, "opt_level", 1), mode=args.mode, preset=args.preset,
                            batch_size=1 if args.batch_size is None else args.batch_size,
                            micro_batch=args.micro_batch, allow_overcommit=args.allow_overcommit,
                            **machine_overrides(args))


def run(args) -> int:
    from ...model_io import warn_if_synthetic
    from .. import console

    if args.model.lower().endswith(".pef"):
        raise InputError(f"'{args.model}' is already compiled")
    with working(console, f"compiling {args.model} for the RDU"):
        exe = compile_from_args(args)
    out = Path(args.output) if args.output else Path(args.model).with_suffix(".pef")
    warn_if_synthetic(exe.graph, out)
    exe.save(out)
    t = exe.estimate.totals
    kinds = [s.kind for s in exe.sections]
    split = " (" + ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(kinds)) + ")" if len(set(kinds)) > 1 else ""
    console.print(f"wrote {out}: {t['sections']} section(s){split}, {t['kernels']} kernel(s) from {t['ops']} op(s); "
                  f"{exe.machine.name} {exe.options.mode}, batch {exe.options.batch_size}")
    return 0
