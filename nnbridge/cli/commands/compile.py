"""nnbridge compile MODEL --backend rdu — write a compiled artifact (PEF)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ...base.errors import InputError, OptionError
from .. import common


def register(sub) -> None:
    p = common.add_parser(sub, "compile", "compile a model for the RDU simulator into a .pef artifact", """\
  nnbridge compile model.onnx --backend rdu                      # writes model.pef (sn40l, o1)
  nnbridge compile model.onnx --backend rdu -o out/model.pef --mode o0 --preset plasticine
  nnbridge compile model.onnx --backend rdu --batch-size 16 --set reconfig_us=5
  nnbridge compile digits_cnn.onnx --backend rdu --optimizer sgd --lr 0.05 --batch-size 32   # a training step
  nnbridge measure-performance digits_cnn.pef      # training throughput, fwd / bwd / opt split
""")
    common.add_model_args(p)
    common.add_backend_args(p, default="rdu")
    add_rdu_args(p)
    p.add_argument("--output", "-o", help="artifact path (default: MODEL with the suffix .pef)")
    p.set_defaults(func=run)


def add_rdu_args(p: argparse.ArgumentParser) -> None:
    """Compile-time options of the RDU simulator, shared by compile and measure-* commands. Those
    with defaults listed in ``DEFAULTS`` default to None so that one given where it is not read
    (an LLM's --context for a file, --lr without --optimizer) is refused rather than ignored."""
    p.add_argument("--preset", help="chip: plasticine, sn10 or sn40l (default sn40l)")
    p.add_argument("--mode", choices=["o0", "o1"],
                   help="o0: one operator per section; o1: fusion + resource-driven sections (default)")
    p.add_argument("--batch-size", "-B", type=int,
                   help="samples per run (default 1, or the batch a .pef was compiled for)")
    p.add_argument("--micro-batch", type=int, help="samples per pipeline token (default: the compiler's "
                   "choice, the fastest whose tokens fit on chip)")
    p.add_argument("--allow-overcommit", action="store_true", default=None,
                   help="price a model whose weights exceed the last off-chip tier instead of refusing it")
    p.add_argument("--config", metavar="FILE.toml", help="machine parameters from a TOML file ([rdu] table or "
                   "top level; the names --set takes, tiers as hbm_bw_gbps …); --set overrides them")
    serving = p.add_argument_group("LLM serving (MODEL = llama-3.1-8b, llama-3.1-70b or llama-3.1-405b: "
                                   "weights as shapes only)")
    serving.add_argument("--phase", choices=["decode", "prefill"],
                         help="one decode step over the KV cache, or the prompt's prefill (default decode)")
    serving.add_argument("--context", type=int, help="cached tokens a decode step reads (4096)")
    serving.add_argument("--prompt", type=int, help="prompt tokens of a prefill (128)")
    serving.add_argument("--sockets", type=int,
                         help="tensor-parallel sockets; the estimate is one socket's, AllReduce on the links (1)")
    training = p.add_argument_group("training (SambaFlow's fwd, bwd and opt sections)")
    training.add_argument("--optimizer", choices=["sgd", "adam", "adamw"],
                          help="compile one training step: forward and loss, backward, and this optimizer "
                               "(default: --inference, the forward pass only)")
    training.add_argument("--inference", action="store_true", help="compile the forward pass only (the default)")
    training.add_argument("--loss", choices=["cross-entropy", "mse"],
                          help="the training loss (default: cross-entropy on the model's scores)")
    training.add_argument("--lr", type=float, help="learning rate, fixed at compile time (0.05)")
    training.add_argument("--momentum", type=float, help="SGD momentum (0.9; sgd only)")
    training.add_argument("--weight-decay", type=float, help="L2 weight decay (0)")


#: the values of add_rdu_args' options when they are not given
DEFAULTS = {"phase": "decode", "context": 4096, "prompt": 128, "sockets": 1, "loss": "cross-entropy", "lr": 0.05,
            "momentum": 0.9, "weight_decay": 0.0}
#: the options that shape an LLM from the zoo, and those of a training step
SERVING = {"phase": "--phase", "context": "--context", "prompt": "--prompt", "sockets": "--sockets"}
TRAINING = {"loss": "--loss", "lr": "--lr", "momentum": "--momentum", "weight_decay": "--weight-decay"}
#: what a compiled program (.pef) does not read: it runs as it was compiled
COMPILED = {"format": "--format", "input_shape": "--input-shape", "dim": "--dim", "passes": "--passes",
            **common.LBANN_SOURCE_FLAGS, "opt_level": "--opt-level", "disable_pass": "--disable-pass",
            "backend_options": "--set",
            "config": "--config", "mode": "--mode", "preset": "--preset", "optimizer": "--optimizer",
            "inference": "--inference", "allow_overcommit": "--allow-overcommit", **SERVING, **TRAINING}
#: the flags that are also settings of the RDU backend (``RduBackend.settings``)
FLAG_SETTINGS = {"mode": "--mode", "preset": "--preset", "batch_size": "--batch-size", "micro_batch": "--micro-batch",
                 "allow_overcommit": "--allow-overcommit"}


def option(args: argparse.Namespace, name: str) -> Any:
    """An add_rdu_args option's value, its default when not given."""
    value = getattr(args, name, None)
    return DEFAULTS[name] if value is None else value


def rdu_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The RDU backend's settings from --config, then --set, then the flags that name settings
    (--mode, --preset, --batch-size, --micro-batch, --allow-overcommit), each checked against what the
    backend declares."""
    from ...backends import get_backend
    from ...base.fileio import read_toml

    rdu = get_backend("rdu")
    out = rdu.options(read_toml(args.config, "RDU machine file", "rdu"), args.config) if args.config else {}
    out.update(common.backend_options(args, "rdu"))
    for name, flag in FLAG_SETTINGS.items():
        value = getattr(args, name, None)
        if value is not None:
            if name in common.parse_assignments(getattr(args, "backend_options", None), "--set"):
                raise OptionError(f"{flag} and --set {name}=…: give one of them")
            out.update(rdu.options({name: value}))
    return out


def llm_graph_from_args(args: argparse.Namespace):
    """The zoo's Llama graph when MODEL names one (and no such file exists), else None."""
    from ...zoo.llm import LLAMA_3_1, llama_config, llama_graph

    names = [c.name for c in LLAMA_3_1.values()]
    if args.model.lower() not in names or Path(args.model).exists():
        common.refuse_unread(args, f"for '{args.model}': they shape the zoo's LLMs ({', '.join(names)})", SERVING)
        return None
    return llama_graph(llama_config(args.model), phase=option(args, "phase"), context=option(args, "context"),
                       prompt=option(args, "prompt"), sockets=option(args, "sockets"))


def compile_from_args(args: argparse.Namespace):
    """The RDU executable for MODEL (compiled) or for a .pef (loaded as stored)."""
    import nnbridge

    from ...backends.rdu import load_pef
    from ..common import load_model_from_args

    if args.model.lower().endswith(".pef"):
        common.refuse_unread(args, f"by a compiled program ({args.model} is measured as it was compiled)", COMPILED)
        return load_pef(args.model)
    if getattr(args, "backend", "rdu") != "rdu":
        raise OptionError(f"only the rdu backend has compiled artifacts (got --backend {args.backend})")
    settings = rdu_settings(args)
    graph = llm_graph_from_args(args) or load_model_from_args(args)
    if getattr(args, "optimizer", None):
        from ...training import compile_training

        if args.inference:
            raise OptionError("--inference and --optimizer exclude each other: a program is one or the other")
        common.refuse_unread(args, "by a training step (its pipeline is the backend's at --opt-level, without folding)",
                             {"passes": "--passes", "disable_pass": "--disable-pass"})
        if args.optimizer != "sgd":
            common.refuse_unread(args, f"by --optimizer {args.optimizer} (Adam's moment rates are fixed)",
                                 {"momentum": "--momentum"})
        return compile_training(graph, batch_size=settings.pop("batch_size", 1), loss=option(args, "loss"),
                                optimizer=args.optimizer, lr=option(args, "lr"), momentum=option(args, "momentum"),
                                weight_decay=option(args, "weight_decay"), opt_level=common.opt_level(args), **settings)
    common.refuse_unread(args, "without --optimizer (they shape a training step)", TRAINING)
    return nnbridge.compile(graph, backend="rdu", passes=common.chosen_passes(args, "rdu"),
                            opt_level=common.opt_level(args), **settings)


def run(args) -> int:
    from ...api.model_io import warn_if_synthetic
    from .. import console

    if args.model.lower().endswith(".pef"):
        raise InputError(f"'{args.model}' is already compiled")
    with common.working(console, f"compiling {args.model} for the RDU"):
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
