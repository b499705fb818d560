"""nnbridge train MODEL — train on the reference backend (loss, gradients, optimizer in the IR)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from .. import common


def register(sub) -> None:
    p = common.add_parser(sub, "train", "train a model on .npz data (or scikit-learn's digits) and save it", """\
  nnbridge train digits_cnn.onnx --data digits --epochs 10 --out trained.onnx --plot curve.png
  nnbridge train model.onnx --data train.npz --loss cross-entropy --optimizer adam --lr 1e-3
  nnbridge train model.onnx --data pairs.npz --loss mse --epochs 50 --batch-size 64 --out fit.prototext
  nnbridge train model.onnx --data train.npz --json history.json          # per-epoch figures
""")
    common.add_model_args(p)
    p.add_argument("--data", required=True, metavar="FILE.npz|digits",
                   help="an .npz with x (samples) and y (class labels, or float targets for mse); 'digits': "
                        "scikit-learn's 8×8 handwritten digits, x as (N, 1, 8, 8)")
    p.add_argument("--loss", default="cross-entropy", choices=["cross-entropy", "mse"],
                   help="cross-entropy on the model's scores (a final Softmax is folded into the loss), or "
                        "mean squared error (default: cross-entropy)")
    p.add_argument("--optimizer", default="sgd", choices=["sgd", "adam", "adamw"],
                   help="ONNX's Momentum op (SGD with momentum) or Adam op; adamw decays weights after the "
                        "step (default: sgd)")
    p.add_argument("--lr", type=float, default=0.05, help="learning rate (default: 0.05)")
    p.add_argument("--momentum", type=float, help="SGD momentum (default: 0.9; sgd only)")
    p.add_argument("--weight-decay", type=float, default=0.0,
                   help="weight decay: L2 on the gradient (sgd, adam), decoupled (adamw) (default: 0)")
    p.add_argument("--nesterov", action="store_true", help="Nesterov momentum (sgd with --momentum above 0)")
    p.add_argument("--semantics", default="auto", choices=["auto", "torch", "onnx"],
                   help="where ONNX and torch differ (BatchNorm's running variance, Adam's epsilon, AdamW's "
                        "decay order), follow torch or ONNX; auto: torch for a model exported by torch "
                        "(default: auto; docs/training.md)")
    p.add_argument("--skip-nonfinite", action="store_true",
                   help="leave out (and count) batches whose loss, gradients or update are not finite instead of "
                        "stopping")
    p.add_argument("--epochs", type=int, default=10, help="passes over the training data (default: 10)")
    p.add_argument("--batch-size", type=int, default=32, help="samples per step (default: 32)")
    p.add_argument("--val-split", type=float, default=0.2,
                   help="fraction held out for validation after each epoch (default: 0.2)")
    p.add_argument("--seed", type=int, default=0, help="shuffling and dropout seed: a seed repeats a run exactly")
    p.add_argument("--out", "-o", help="write the trained model (format from the name: .onnx, .prototext, "
                                       "_topo.pbtxt)")
    p.add_argument("--plot", metavar="FILE.png", help="loss and accuracy per epoch as a PNG")
    common.add_threads_arg(p)
    common.add_json_arg(p, "the settings and the per-epoch figures")
    p.set_defaults(func=train)


def train(args) -> int:
    from ...training import digits, load_data, plot_history, resolve_semantics
    from ...training import train as run_training
    from .. import console

    if args.optimizer != "sgd":
        common.refuse_unread(args, f"by --optimizer {args.optimizer} (Adam's moment rates are fixed)",
                             {"momentum": "--momentum", "nesterov": "--nesterov"})
    x, y = digits() if args.data == "digits" else load_data(args.data)
    graph = common.load_model_from_args(args)
    semantics = resolve_semantics(args.model, graph, args.semantics)  # the file tells who exported it
    bar, progress = progress_bar(console, args.epochs)
    with bar:
        result = run_training(graph, x, y, loss=args.loss, optimizer=args.optimizer, lr=args.lr,
                              momentum=0.9 if args.momentum is None else args.momentum,
                              weight_decay=args.weight_decay, nesterov=args.nesterov,
                              epochs=args.epochs, batch_size=args.batch_size, val_split=args.val_split,
                              seed=args.seed, semantics=semantics, skip_nonfinite=args.skip_nonfinite,
                              progress=progress)
    if args.out:
        result.save(args.out)
    if args.plot:
        plot_history(result.history, args.plot, title=Path(args.model).stem)
    if args.json:
        settings = {k: v for k, v in result.settings.items() if args.optimizer == "sgd" or
                    k not in ("momentum", "nesterov") and k != "epochs"}  # every hyper-parameter used
        common.write_json({"model": args.model, "data": args.data, **settings, "seed": args.seed,
                           "epochs": [vars(e) for e in result.history]}, args.json)
        if args.json == "-":
            return 0
    print_history(console, result.history)
    for what, path in (("trained model", args.out), ("curves", args.plot)):
        if path:
            console.print(f"wrote {what}: {path}", highlight=False)
    return 0


def print_history(console, history) -> None:
    """One line per epoch: loss and accuracy, then the validation figures."""
    for e in history:
        line = f"epoch {e.epoch:3d}  loss {e.loss:.4f}"
        line += f"  accuracy {100 * e.accuracy:5.1f}%" if e.accuracy is not None else ""
        line += f"  val loss {e.val_loss:.4f}" if e.val_loss is not None else ""
        line += f"  val accuracy {100 * e.val_accuracy:5.1f}%" if e.val_accuracy is not None else ""
        line += f"  skipped {e.skipped} non-finite batch(es)" if e.skipped else ""
        console.print(f"{line}  ({e.seconds:.2f} s)", highlight=False)


def progress_bar(console, epochs: int):
    """A progress bar and the ``progress`` callback of the training loops (None off a terminal)."""
    bar = _bar(console, epochs)
    if bar is None:
        return contextlib.nullcontext(), None
    task = bar.add_task("training", total=epochs, figures="")

    def progress(epoch, step, steps, figures):
        shown = "  ".join(f"{k} {v:.4f}" if k == "loss" else f"{k} {100 * v:.1f}%" for k, v in figures.items())
        bar.update(task, completed=epoch - 1 + step / steps, description=f"epoch {epoch}/{epochs}", figures=shown)

    return bar, progress


def _bar(console, epochs: int):
    """A progress bar with ETA and the running figures, on a terminal only."""
    if not console.is_terminal:
        return None
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), TimeRemainingColumn(),
                    TextColumn("{task.fields[figures]}"), console=console, transient=True)
