"""nnbridge convert SRC DST — formats chosen by file name."""

from __future__ import annotations

import warnings
from pathlib import Path

from ...base.errors import NNBridgeWarning
from ...converters.lbann.experiment import inference_only
from ...converters.notes import conversion_notes
from ...ir.stats import parameters
from .. import common

#: the flags that each set one writer option of ``nnbridge.convert``: flag → (option, argparse's
#: keywords). Declared and copied into the options from this one table; a switch's default is
#: None, so an option not given is not passed (a writer refuses an option it does not read).
WRITER_FLAGS: dict[str, tuple[str, dict]] = {
    "--lbann-weights": ("lbann_weights", {
        "choices": ["inline", "npy"], "help": "LBANN: carry weights inline or as .npy files (default: by size)"}),
    "--lbann-version": ("lbann_version", {
        "choices": ["0.103", "0.104", "develop"], "help": "LBANN: the schema era to write for (default 0.104)"}),
    "--lbann-train": ("lbann_train", {
        "nargs": "?", "const": True, "metavar": "KEY=VALUE,...",
        "help": "LBANN: write an experiment LBANN trains (loss, objective, metric, optimizer, trainer; weights "
                "trainable), optionally with loss=cross-entropy|mse (default: cross-entropy on a softmax output), "
                "optimizer=sgd|adam|adamw, lr=, momentum=, weight_decay=, epochs=, freeze=true, data=FILE.npz "
                "(x, y: a numpy_npz reader of <stem>_data.npz), val_split= (default: an inference-only file, "
                "which convert warns about)"}),
    "--opset": ("onnx_opset", {
        "type": int, "metavar": "N",
        "help": "ONNX: write this default-domain opset, e.g. 17 for older runtimes (default: the IR's)"}),
    "--smaug-backend": ("smaug_backend", {
        "choices": ["Reference", "SMV"], "help": "SMAUG: the backend the files are written for (default SMV)"}),
    "--smaug-input": ("smaug_inputs", {
        "action": "append", "metavar": "NAME=FILE.npy",
        "help": "SMAUG: the network input stored in the params file, which SMAUG's runtime runs (default: "
                "SMAUG's random-data recipe); repeatable"}),
    "--allow-fp16-overflow": ("smaug_allow_overflow", {
        "action": "store_true", "default": None,
        "help": "SMAUG SMV: write files whose stored input drives a value past fp16's range (refused by "
                "default: the real runtime computes inf/NaN)"}),
}


def register(sub) -> None:
    p = common.add_parser(sub, "convert", "convert a model between formats (by file name)", """\
  nnbridge convert model.onnx model_copy.onnx            # ONNX → IR → ONNX (opset normalized)
  nnbridge convert model.onnx model_17.onnx --opset 17   # for runtimes that stop at opset 17
  nnbridge convert model.onnx out/lenet_topo.pbtxt       # ONNX → SMAUG (+ lenet_params.pb)
  nnbridge convert model.onnx lenet.prototext --lbann-weights npy
  nnbridge convert lenet.prototext lenet.onnx --input-shape input=1x28x28
  nnbridge convert det.onnx det.prototext --dim batch=1 --dim height=640 --dim width=640
  nnbridge convert model.onnx out/m_topo.pbtxt --smaug-input data=image.npy   # the input SMAUG runs
  nnbridge convert model.onnx model.prototext --dry-run  # what converts, what is refused, nothing written
""")
    p.add_argument("src", help="source model (.onnx, _topo.pbtxt, .prototext)")
    p.add_argument("dst", help="destination file; its name picks the format")
    common.add_shape_args(p)
    p.add_argument("--batch-size", type=int, dest="source_batch_size", metavar="N",
                   help="LBANN source: batch of the imported graph (default: the file's mini_batch_size)")
    p.add_argument("--option", "-o", action="append", metavar="KEY=VALUE",
                   help="format-specific writer option (e.g. smaug_backend=SMV); repeatable")
    for flag, (_, keywords) in WRITER_FLAGS.items():
        p.add_argument(flag, **keywords)
    p.add_argument("--dry-run", action="store_true",
                   help="write nothing: say per op type what converts and what is refused (and why), and "
                        "which files the conversion would write, with their sizes")
    common.add_json_arg(p, "what was written: files and sizes, nodes, parameters, notes")
    p.set_defaults(func=run)


def run(args) -> int:
    import nnbridge

    from ...converters import format_for
    from .. import console

    options = dict(common.load_options(args))
    options.update(common.parse_assignments(args.option, "--option"))
    for flag, (option, _) in WRITER_FLAGS.items():
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            options[option] = common.load_inputs(value) if option == "smaug_inputs" else value
    if args.dry_run:
        common.refuse_unread(args, "by --dry-run (it prints what would be written)", {"json": "--json"})
        return dry_run(args, options)
    with common.working(console, f"converting {args.src} → {args.dst}"):
        graph = nnbridge.convert(args.src, args.dst, **options)
    fmt = format_for(args.dst)
    if fmt.name == "lbann" and "lbann_train" not in options and (line := inference_only(graph, args.dst)):
        warnings.warn(NNBridgeWarning(line), stacklevel=1)
    sizes = {f: f.stat().st_size for f in fmt.written(Path(args.dst))}
    files = list(sizes)
    count, nbytes = parameters(graph)
    notes = conversion_notes(graph, fmt.name, options) + fmt.notes(Path(args.dst))
    if args.json:
        common.write_json({"source": args.src, "destination": args.dst,
                           "files": [{"path": str(f), "bytes": b} for f, b in sizes.items()],
                           "source_nodes": len(graph), "parameters": count, "parameter_bytes": nbytes, "notes": notes},
                          args.json)
        if args.json == "-":
            return 0
    shown = ", ".join(str(f) for f in files[:2]) + (f" + {len(files) - 2} files in {files[2].parent}/"
                                                     if len(files) > 2 else "")
    console.print(f"wrote {shown} ({sum(sizes.values()) / 2**20:,.2f} MiB): "
                  f"{len(graph)} source nodes, {count:,} parameters ({nbytes / 2**20:,.2f} MiB as loaded)")
    for note in notes:
        console.print(f"  note: {note}")
    return 0


def dry_run(args, options: dict) -> int:
    """Convert into a scratch directory and report per op type; nothing is left behind. A
    conversion that would be refused lists every reason (with counts) and exits 1 as convert would."""
    import tempfile

    import nnbridge

    from ...base.errors import UnsupportedOpError
    from ...converters import format_for
    from .. import console

    fmt = format_for(args.dst)
    graph = nnbridge.load(args.src, **{k: v for k, v in options.items() if k in _LOAD_KEYS})
    counts: dict[str, int] = {}
    for node in graph.nodes:
        label = f"{node.domain}::{node.op}" if node.domain else node.op
        counts[label] = counts.get(label, 0) + 1
    decomposed = _decomposed(graph, fmt, options)
    refused: dict[str, list[str]] = {}
    sizes: dict[str, int] = {}
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(scratch) / Path(args.dst).name
        try:
            nnbridge.convert(args.src, target, **options)
            sizes = {f.name: f.stat().st_size for f in fmt.written(target) if f.is_file()}
            notes = fmt.notes(target)
        except UnsupportedOpError as exc:
            for item in exc.items:
                label = f"{item.domain}::{item.op}" if item.domain else item.op
                refused.setdefault(label, []).append(item.reason)
    console.print(f"{args.src} → {args.dst} ({fmt.name}), dry run: {len(graph)} nodes, nothing written",
                  highlight=False)
    for label, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        reasons = refused.pop(label, [])
        fate = "converts" if not reasons else \
            "refused: " + "; ".join(f"{r} ({reasons.count(r)})" for r in dict.fromkeys(reasons))
        if decomposed.get(label) and not reasons:
            fate += f" ({decomposed[label]} rewritten into ops {fmt.name} has)"
        console.print(f"  {label:<28} {count:>5}  {fate}", highlight=False)
    for label, reasons in refused.items():  # nodes the writer met after folding or rewriting
        console.print(f"  {label:<28} {len(reasons):>5}  refused: {'; '.join(dict.fromkeys(reasons))}",
                      highlight=False)
    for name, size in sizes.items():
        console.print(f"  would write {Path(args.dst).with_name(name)} ({size / 2**20:,.2f} MiB)", highlight=False)
    for note in notes:
        console.print(f"  note: {note}", highlight=False)
    return 0 if sizes else 1


def _decomposed(graph, fmt, options: dict) -> dict[str, int]:
    """How many nodes of each op the writer's decompositions (ir/decompositions.py) rewrite."""
    return {} if fmt.prepare is None else dict(fmt.prepare(graph, options)[1])


#: the loader's options among convert's (the writer's go to the scratch conversion only)
_LOAD_KEYS = {"input_shapes", "dims", "batch_size", "synthetic_scale", "activations", *common.LBANN_SOURCE_FLAGS}
