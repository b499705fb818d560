"""nnbridge run MODEL — run on a backend, write outputs as .npy."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import common

#: what a compiled program (.pef) does not read: it runs as it was compiled
COMPILED = {"format": "--format", "input_shape": "--input-shape", **common.LBANN_SOURCE_FLAGS, "passes": "--passes",
            "opt_level": "--opt-level",
            "disable_pass": "--disable-pass", "backend_options": "--set", "source_batch_size": "--batch-size"}

#: outputs with at most this many values are printed in full
SHOWN = 32


def register(sub) -> None:
    p = common.add_parser(sub, "run", "run a model and write its outputs as .npy files", """\
  nnbridge run model.onnx                                   # generated inputs, prints output shapes
  nnbridge run minerva_ref_topo.pbtxt                       # a SMAUG file runs the input its params store
  nnbridge run model.onnx --input data=x.npy --out results/
  nnbridge run model.onnx --threads 1 --profile             # single-threaded per-node timings
  nnbridge run model.onnx --backend smv --profile           # per-layer simulator report
  nnbridge run model.onnx --backend smv --set accels=4 --set mem_policy=acp
  nnbridge run model.pef                                    # an RDU compiled artifact, on its compiled batch
  nnbridge run lenet.prototext --batch-size 8 --input-shape image=1x28x28   # an LBANN file at batch 8
  nnbridge run step.pef --data digits --epochs 5            # a training program (compile --optimizer) trains
  nnbridge run model.onnx --json - | jq '.outputs[0].max'
""")
    common.add_model_args(p)
    common.add_backend_args(p)
    common.add_input_args(p)
    common.add_threads_arg(p)
    p.add_argument("--out", "-o", help="directory for the outputs (<name>.npy each)")
    p.add_argument("--profile", action="store_true", help="print the per-node report of the run")
    p.add_argument("--batch-size", type=int, dest="source_batch_size", metavar="N",
                   help="LBANN source: the mini-batch the imported graph runs (default: the file's "
                        "mini_batch_size); other formats take their batch from --dim/--input-shape")
    training = p.add_argument_group("a compiled training program (compile --optimizer): run trains, as SambaFlow's")
    training.add_argument("--data", metavar="FILE.npz|digits", help="training data: an .npz with x and y, or digits")
    training.add_argument("--epochs", type=int, default=1, help="passes over the data (default 1)")
    training.add_argument("--val-split", type=float, default=0.2, help="held out, evaluated after each epoch (0.2)")
    common.add_json_arg(p, "the inputs used and each output's dtype, shape and statistics (values when small)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ...api.inputs import batch_inputs, joined, random_inputs
    from ...reporting.report import Report
    from .. import console

    if args.model.lower().endswith(".pef"):  # an RDU compiled artifact: run it as stored
        exe = program = _stored_program(args)
        graph = exe.graph
        if exe.training or args.data:
            return _train(args, exe)
    else:
        program = None
        graph, exe = _compiled_model(args)
    given = {**graph.input_values, **common.load_inputs(args.input)}  # a SMAUG file runs its stored input
    if program is not None:  # the batch it was compiled for (SambaFlow), call by call if need be
        feeds, _, calls = batch_inputs(graph, program.options.batch_size, args.seed, common.parse_dims(args.dim), given)
    else:
        feeds = random_inputs(graph, seed=args.seed, dims=common.parse_dims(args.dim), given=given)
        calls = [feeds]
    with common.working(console, f"running {graph.name} on {exe.backend}"):
        outputs = joined([exe.run(f) for f in calls])
    if args.out:
        _save_outputs(outputs, Path(args.out))
    profiled = args.profile and isinstance(exe.report, Report)
    if args.json:
        common.write_json({"model": graph.name, "backend": exe.backend,
                           "inputs": [_stats(name, value) for name, value in feeds.items()],
                           "outputs": [_stats(name, value) for name, value in outputs.items()],
                           "report": exe.report.to_dict() if profiled else None}, args.json)
        if args.json == "-":
            return 0
    _print_outputs(outputs)
    if args.out:
        console.print(f"outputs written to {args.out}/")
    if profiled:
        console.print(exe.report.to_table())
    return 0


def _stored_program(args):
    """A ``.pef``, loaded to run as it was compiled (the RDU backend only; no compile options)."""
    from ...backends.rdu import load_pef
    from ...base.errors import OptionError

    if args.backend not in ("reference", "rdu"):
        raise OptionError(f"{args.model} is a compiled RDU program; it runs on rdu, not --backend {args.backend}")
    common.refuse_unread(args, f"by a compiled program ({args.model} runs as it was compiled)", COMPILED)
    return load_pef(args.model)


def _compiled_model(args):
    """The model as loaded, and compiled for ``--backend`` with its options and passes."""
    import nnbridge

    from ...base.errors import OptionError
    from .. import console

    if args.data:
        raise OptionError(f"--data trains a compiled training program (compile --optimizer); {args.model} "
                          f"is a model (use 'nnbridge train' to train it)")
    config = common.backend_options(args, args.backend)
    graph = common.load_model_from_args(args)
    if args.profile and args.backend == "reference":
        config["profile"] = True
    with common.working(console, f"compiling {graph.name} for {args.backend}"):
        return graph, nnbridge.compile(graph, backend=args.backend, passes=common.chosen_passes(args, args.backend),
                                       opt_level=common.opt_level(args), **config)


def _print_outputs(outputs: dict) -> None:
    """Each output's dtype and shape, with its values when it is small."""
    from .. import console

    for name, value in outputs.items():
        arr = np.asarray(value)
        shown = ""
        if arr.size <= SHOWN and arr.dtype.kind in "fiub":
            shown = " [" + " ".join(f"{v:.6g}" for v in arr.reshape(-1).tolist()) + "]"
        console.print(f"{name}: {arr.dtype}{list(arr.shape)}{shown}", markup=False, soft_wrap=True)


def _train(args, exe) -> int:
    """SambaFlow's run of a training PEF: steps over the data in bf16 with fp32 master weights."""
    from ...base.errors import InputError
    from ...training import digits, load_data, train_compiled
    from .. import console
    from .train import print_history, progress_bar

    if not exe.training:
        raise InputError(f"'{args.model}' is an inference program; compile it with --optimizer to train it")
    if not args.data:
        raise InputError(f"'{args.model}' is a training program: give --data FILE.npz (or digits) to train it")
    common.refuse_unread(args, f"by a training program ({args.model} trains on --data)",
                         {"input": "--input", "out": "--out", "profile": "--profile", "dim": "--dim"})
    x, y = digits() if args.data == "digits" else load_data(args.data)
    bar, progress = progress_bar(console, args.epochs)
    with bar:
        history = train_compiled(exe, x, y, epochs=args.epochs, val_split=args.val_split, seed=args.seed or 0,
                                 progress=progress)
    if args.json:
        common.write_json({"model": args.model, "data": args.data, "epochs": [vars(e) for e in history]}, args.json)
        if args.json == "-":
            return 0
    print_history(console, history)
    return 0


def _stats(name: str, value) -> dict:
    arr = np.asarray(value) if not isinstance(value, (list, tuple, dict)) else None
    if arr is None or arr.dtype == object:
        return {"name": name, "kind": type(value).__name__}
    out = {"name": name, "dtype": str(arr.dtype), "shape": list(arr.shape)}
    if arr.size and arr.dtype.kind in "fiub" or arr.dtype.kind == "V":
        wide = arr.astype(np.float64)
        finite = wide[np.isfinite(wide)]
        out.update(min=float(finite.min()) if finite.size else None, max=float(finite.max()) if finite.size else None,
                   mean=float(finite.mean()) if finite.size else None, nan=int(np.isnan(wide).sum()),
                   inf=int(np.isinf(wide).sum()))
        if arr.size <= SHOWN:
            out["values"] = wide.reshape(-1).tolist()
    return out


def _save_outputs(outputs: dict, out: Path) -> None:
    """One .npy per output, written as a whole: every output is checked before the first byte (a
    sequence output, or two outputs that would share a file, are refused), and the files appear
    together or not at all, as does the directory when this run makes it (``atomic_outputs``)."""
    from ...api.inputs import npy_names
    from ...base.errors import InputError, OutputError
    from ...base.fileio import atomic_outputs, check_numel, check_output_size

    files = npy_names(outputs, "output")
    arrays = {}
    for name, value in outputs.items():
        array = np.asarray(value) if not isinstance(value, (list, tuple, dict)) else None
        if array is not None and array.dtype == object and all(isinstance(v, str) for v in array.reshape(-1)):
            array = array.astype(str)  # string tensors as fixed-width unicode, which .npy stores
        if array is None or array.dtype == object:
            raise InputError(f"output '{name}' is not a tensor (a sequence or a map); --out writes tensors as .npy")
        check_numel(array.shape, f"output '{name}'")  # a broadcast view is small until written
        arrays[name] = array
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out '{out}' is a file; --out names a directory to write one .npy per output in")
    header = 128  # an .npy header's bytes
    check_output_size(sum(a.nbytes + header for a in arrays.values()), out / "outputs", f"--out '{out}'")
    with atomic_outputs([out / files[name] for name in arrays]) as temps:
        for tmp, array in zip(temps, arrays.values()):
            with open(tmp, "wb") as fh:
                np.save(fh, array, allow_pickle=False)
