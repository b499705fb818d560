"""What an LBANN experiment holds beyond the network: data readers, trainer, training algorithm,
optimizer, objective function, metrics, callbacks and the training-only layers (losses, metrics)
they use. The IR does not model them; import keeps them verbatim in the graph's metadata (text
format, so they also travel through ONNX metadata), and the LBANN writer puts them back around
the written network — an LBANN → LBANN conversion gives LBANN the same experiment to train.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
from google.protobuf import text_format

from ...base.errors import FormatError, InputError
from ...ir import Graph
from ...protos.lbann import lbann_pb2

KEY = "lbann.experiment"


def keep(graph: Graph, pb: lbann_pb2.LbannPB, dropped: set[str]) -> None:
    """Record ``pb`` minus the layers the graph carries and the weights those layers own."""
    shell = lbann_pb2.LbannPB()
    shell.CopyFrom(pb)
    carried = {w for layer in pb.model.layer if layer.name not in dropped for w in layer.weights}
    del shell.model.layer[:]
    shell.model.layer.extend(layer for layer in pb.model.layer if layer.name in dropped)
    del shell.model.weights[:]
    shell.model.weights.extend(w for w in pb.model.weights if w.name not in carried)
    shell.model.ClearField("name")
    shell.trainer.ClearField("mini_batch_size")  # the graph's batch dimension says it
    for part, message in (("trainer", shell.trainer), ("model", shell.model)):
        if not message.ByteSize():
            shell.ClearField(part)
    if shell.ByteSize():
        graph.metadata[KEY] = text_format.MessageToString(shell)


def kept(graph: Graph) -> lbann_pb2.LbannPB | None:
    text = graph.metadata.get(KEY)
    if text is None:
        return None
    try:
        return text_format.Parse(text, lbann_pb2.LbannPB())
    except text_format.ParseError as exc:
        raise FormatError(f"graph '{graph.name}': its metadata '{KEY}' is not an LBANN experiment ({exc}); "
                          f"remove the entry to write the network alone") from None


def unmet(shell: lbann_pb2.LbannPB, layer_names: set[str]) -> str | None:
    """Why ``shell`` cannot go around a network with these layers (a training layer reads a layer
    the network does not have), else None."""
    names = layer_names | {layer.name for layer in shell.model.layer}
    for layer in shell.model.layer:
        for parent in layer.parents:
            if parent not in names:
                return f"its layer '{layer.name}' reads '{parent}', which the written network does not have"
    return None


def describe(graph: Graph) -> str | None:
    """One line for ``convert``: what of the source's experiment is written back, or why not."""
    shell = kept(graph)
    if shell is None:
        return None
    problem = unmet(shell, set(graph.values))
    if problem:
        return f"the source's training setup is not written: {problem}"
    parts = [what for what, present in (("data reader", shell.HasField("data_reader")),
                                         ("optimizer", shell.HasField("optimizer")),
                                         ("trainer", shell.HasField("trainer")),
                                         ("objective", shell.model.HasField("objective_function")))
             if present]
    counts = [(len(shell.model.metric), "metric"), (len(shell.model.callback) + len(shell.trainer.callback),
                                                    "callback"), (len(shell.model.layer), "training layer")]
    parts += [f"{n} {what}{'s' if n != 1 else ''}" for n, what in counts if n]
    return "kept the source's training setup: " + ", ".join(parts)


def restore(message: lbann_pb2.LbannPB, graph: Graph) -> None:
    """Put the graph's kept experiment around the written network ``message`` (in place)."""
    shell = kept(graph)
    if shell is None or unmet(shell, {layer.name for layer in message.model.layer}):
        return
    full = lbann_pb2.LbannPB()
    full.CopyFrom(shell)
    del full.model.layer[:]
    del full.model.weights[:]
    full.model.layer.extend([*message.model.layer, *shell.model.layer])
    full.model.weights.extend([*message.model.weights, *shell.model.weights])
    full.model.name = message.model.name
    full.trainer.mini_batch_size = message.trainer.mini_batch_size
    if not shell.HasField("optimizer"):
        full.optimizer.CopyFrom(message.optimizer)
    message.CopyFrom(full)


def training_setup(graph: Graph, *, loss: str, optimizer: str, lr: float, momentum: float, weight_decay: float,
                   epochs: int, batch_size: int, val_split: float = 0.0, data_file: str | None = None,
                   classes: int = 0, nesterov: bool = False) -> None:
    """Record the experiment that trains ``graph`` as nnbridge trained it, for the LBANN writer:
    the labels (or responses) input, softmax and the loss layer on the model's output, the objective,
    a metric (categorical accuracy for classifiers), the optimizer with its hyper-parameters and,
    given ``data_file``, a ``numpy_npz`` data reader of it (arrays ``data`` and ``labels``/``responses``)."""
    out = graph.outputs[0]
    producer = out.producer
    model = lbann_pb2.Model(num_epochs=epochs)
    if loss == "cross-entropy":
        probs = out.name
        if producer is None or producer.op != "Softmax":
            probs = f"{out.name}_probs"
            model.layer.add(name=probs, parents=[out.name]).softmax.SetInParent()
        model.layer.add(name="labels").input.data_field = "labels"
        model.layer.add(name="cross_entropy", parents=[probs, "labels"]).cross_entropy.SetInParent()
        model.layer.add(name="accuracy", parents=[probs, "labels"]).categorical_accuracy.SetInParent()
        model.metric.add().layer_metric.CopyFrom(lbann_pb2.Metric.LayerMetric(layer="accuracy", name="accuracy",
                                                                              unit="%"))
        term = "cross_entropy"
    else:
        model.layer.add(name="responses").input.data_field = "responses"
        model.layer.add(name="mean_squared_error", parents=[out.name, "responses"]).mean_squared_error.SetInParent()
        term = "mean_squared_error"
    model.objective_function.layer_term.add(scale_factor=1.0, layer=term)
    shell = lbann_pb2.LbannPB(model=model)
    if optimizer == "sgd":
        shell.optimizer.sgd.CopyFrom(lbann_pb2.Optimizer.SGD(learn_rate=lr, momentum=momentum, nesterov=nesterov))
    else:
        shell.optimizer.adam.CopyFrom(lbann_pb2.Optimizer.Adam(
            learn_rate=lr, beta1=0.9, beta2=0.999, eps=1e-8,
            adamw_weight_decay=weight_decay if optimizer == "adamw" else 0.0))
    if weight_decay and optimizer != "adamw":  # LBANN's L2 term scale·Σw²/2 adds scale·w to the gradient
        shell.model.objective_function.l2_weight_regularization.add(scale_factor=weight_decay)
    shell.trainer.mini_batch_size = batch_size
    if data_file is not None:
        _npz_reader(shell, data_file, loss, val_split, classes)
    graph.metadata[KEY] = text_format.MessageToString(shell)


def _npz_reader(shell: lbann_pb2.LbannPB, data_file: str, loss: str, val_split: float, classes: int) -> None:
    folder, name = os.path.split(os.path.abspath(data_file))
    reader = shell.data_reader.reader.add(name="numpy_npz", role="train", shuffle=True,
                                          data_filedir=folder + os.sep, data_filename=name,
                                          validation_fraction=val_split, fraction_of_data_to_use=1.0)
    if loss == "cross-entropy":
        reader.disable_responses, reader.num_labels = True, classes
    else:
        reader.disable_labels = True


#: ``--lbann-train`` settings (API ``lbann_train={...}``) and their defaults (``nnbridge train``'s)
TRAIN_DEFAULTS: dict[str, Any] = {"loss": None, "optimizer": "sgd", "lr": 0.05, "momentum": 0.9,
                                  "weight_decay": 0.0, "epochs": 10, "freeze": False, "data": None,
                                  "val_split": 0.2}
_LOSSES, _OPTIMIZERS = ("cross-entropy", "mse"), ("sgd", "adam", "adamw")


def train_settings(given: bool | str | Mapping[str, Any]) -> dict[str, Any]:
    """The training settings of ``lbann_train``: True, a mapping, or ``KEY=VALUE,…`` text
    (``loss=mse,optimizer=adam,lr=0.001,freeze=true``); unknown keys and bad values are refused."""
    if isinstance(given, str):
        pairs = [item.split("=", 1) if "=" in item else [item, "true"] for item in given.split(",") if item.strip()]
        given = {k.strip().replace("-", "_"): v.strip() for k, v in pairs}
    settings = dict(TRAIN_DEFAULTS)
    for key, value in ({} if given is True else dict(given)).items():
        if key not in settings:
            raise InputError(f"--lbann-train: unknown setting '{key}'; known: {', '.join(TRAIN_DEFAULTS)}")
        settings[key] = _setting(key, value)
    return settings


def optimizer_state_note(given: bool | str | Mapping[str, Any]) -> str | None:
    """One line for ``convert --lbann-train``: the optimizer's state cannot travel in the file.
    LBANN's optimizer messages hold hyper-parameters only and its weights their values; momentum
    and Adam moments live in LBANN's checkpoints (tests/lbann/test_lbann_convert_train.py checks
    the schema facts)."""
    settings = train_settings(given)
    if settings["optimizer"] == "sgd" and not settings["momentum"]:
        return None  # plain SGD has no state
    what = "momentum" if settings["optimizer"] == "sgd" else "Adam moments"
    return (f"optimizer state ({what}) is not written: an LBANN prototext has no field for it (LBANN keeps it "
            f"in its checkpoints), so LBANN starts it from zero")


def _setting(key: str, value: Any) -> Any:
    choices = {"loss": _LOSSES, "optimizer": _OPTIMIZERS}.get(key)
    if choices:
        if value not in choices:
            raise InputError(f"--lbann-train {key}={value}: choose from {', '.join(choices)}")
        return value
    if key == "data":
        if not os.path.isfile(str(value)):
            raise InputError(f"--lbann-train data={value}: no such file (an .npz with x and y, as nnbridge "
                             f"train takes)")
        return str(value)
    if key == "freeze":
        if str(value).lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise InputError(f"--lbann-train freeze={value}: give true or false")
        return str(value).lower() in ("true", "1", "yes")
    try:
        number = int(value) if key == "epochs" else float(value)
    except (TypeError, ValueError):
        raise InputError(f"--lbann-train {key}={value}: not a number") from None
    low_ok = {"lr": number > 0, "epochs": number >= 1, "momentum": 0 <= number < 1, "weight_decay": number >= 0,
              "val_split": 0 <= number < 1}
    if not (math.isfinite(number) and low_ok[key]):
        raise InputError(f"--lbann-train {key}={value}: out of range (lr > 0, epochs ≥ 1, 0 ≤ momentum < 1, "
                         f"weight_decay ≥ 0, 0 ≤ val_split < 1)")
    return number


def set_up_training(graph: Graph, settings: Mapping[str, Any], source: str, data_file: str | None = None
                    ) -> dict[str, np.ndarray] | None:
    """Record (in ``graph``'s metadata) the experiment that trains ``graph`` with ``settings``; the
    loss is the one named, else cross entropy when the output is a softmax. With ``settings["data"]``
    the experiment reads ``data_file`` (numpy_npz): the arrays to write there are returned."""
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise InputError(f"--lbann-train: {source} has {len(graph.inputs)} inputs and {len(graph.outputs)} outputs; "
                         f"the written experiment trains a model with one input (samples) and one output")
    loss = settings["loss"]
    if loss is None:
        producer = graph.outputs[0].producer
        if producer is None or producer.op != "Softmax" or producer.domain:
            raise InputError(f"--lbann-train: the output of {source} is not a softmax; name the loss: "
                             f"--lbann-train loss=cross-entropy (class scores) or loss=mse (regression)")
        loss = "cross-entropy"
    shape = graph.inputs[0].type.shape
    batch = shape[0] if shape and isinstance(shape[0], int) else 1
    arrays, classes = None, 0
    if settings["data"] is not None and data_file is not None:
        x, y = _training_data(settings["data"])
        if tuple(x.shape[1:]) != tuple(shape[1:]):
            raise InputError(f"--lbann-train data={settings['data']}: samples of shape {list(x.shape[1:])}, but "
                             f"{source} takes {list(shape[1:])}")
        if len(x) == 0 or len(x) != len(y):
            raise InputError(f"--lbann-train data={settings['data']}: {len(x)} samples and {len(y)} labels or "
                             f"targets; give as many of each, at least one")
        if loss == "cross-entropy":
            if y.ndim != 1 or not np.array_equal(y, np.floor(y)) or y.min() < 0:
                raise InputError(f"--lbann-train data={settings['data']}: cross entropy takes y as one class "
                                 f"index (0, 1, …) per sample")
            classes = int(y.max()) + 1
            arrays = {"data": x.astype(np.float32), "labels": y.astype(np.int32)}
        else:
            arrays = {"data": x.astype(np.float32), "responses": y.astype(np.float32)}
    training_setup(graph, loss=loss, optimizer=settings["optimizer"], lr=settings["lr"],
                   momentum=settings["momentum"], weight_decay=settings["weight_decay"], epochs=settings["epochs"],
                   batch_size=batch, val_split=settings["val_split"],
                   data_file=data_file if arrays is not None else None, classes=classes)
    return arrays


def _training_data(path: str) -> tuple[np.ndarray, np.ndarray]:
    """``x`` and ``y`` of the ``.npz`` that ``data=`` names (no pickles), as ``nnbridge train`` reads
    it (``training.load_data``, which this converter may not import: training imports it)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            if "x" not in data.files or "y" not in data.files:
                raise InputError(f"--lbann-train data={path}: the .npz needs arrays x (samples) and y (labels or "
                                 f"targets), e.g. np.savez(path, x=x, y=y)")
            return data["x"], data["y"]
    except (OSError, ValueError) as exc:
        raise InputError(f"--lbann-train data={path}: not a readable .npz file ({exc})") from None


def inference_only(graph: Graph, path: str) -> str | None:
    """The one line ``convert`` warns with when the written file has nothing to train with."""
    shell = kept(graph)
    objective = shell.model.objective_function if shell is not None else None
    if objective is not None and (objective.layer_term or objective.l2_weight_regularization) and \
            unmet(shell, set(graph.values)) is None:
        return None
    return (f"{path} is inference-only (no loss, objective or optimizer: LBANN would not train it); "
            f"--lbann-train writes a trainable experiment")


#: LBANN training algorithms (their message) that nnbridge.train does not do, and what they do
_OTHER_ALGORITHMS = {
    "KFAC": "K-FAC: gradients preconditioned by per-layer Kronecker factors of activation and error "
            "covariances",
    "LTFB": "LTFB: a tournament between a population of trainers",
}


def foreign_algorithm(graph: Graph) -> str | None:
    """Why ``nnbridge.train`` cannot train as the experiment says (its trainer names a training
    algorithm other than LBANN's batched iterative descent), else None."""
    shell = kept(graph)
    if shell is None or not shell.trainer.HasField("training_algorithm"):
        return None
    algorithm = shell.trainer.training_algorithm
    kind = algorithm.parameters.TypeName().removeprefix("lbann_data.")
    if kind in ("SGD", ""):
        return None
    what = _OTHER_ALGORITHMS.get(kind, f"LBANN's {kind} training algorithm")
    return (f"graph '{graph.name}': its experiment trains with '{algorithm.name}' ({what}), which nnbridge train "
            f"does not do; it trains with first-order descent only")


def trained_with(graph: Graph) -> dict[str, Any] | None:
    """``nnbridge.train`` settings of the experiment a graph was read with (loss, optimizer and
    its hyper-parameters, epochs, mini-batch size), or None when it has none nnbridge knows."""
    shell = kept(graph)
    if shell is None:
        return None
    if (why := foreign_algorithm(graph)) is not None:
        raise InputError(why)
    layers = {layer.name: layer.WhichOneof("layer_type") for layer in shell.model.layer}
    terms = [layers.get(term.layer) for term in shell.model.objective_function.layer_term]
    loss = {"cross_entropy": "cross-entropy", "mean_squared_error": "mse"}.get(terms[0] if len(terms) == 1 else "")
    kind = shell.optimizer.WhichOneof("optimizer_type")
    if loss is None or kind not in ("sgd", "adam"):
        return None
    opt = getattr(shell.optimizer, kind)
    decay = sum(t.scale_factor for t in shell.model.objective_function.l2_weight_regularization)
    settings = {"loss": loss, "lr": opt.learn_rate, "weight_decay": decay,
                "epochs": shell.model.num_epochs or 1,
                "batch_size": int(graph.metadata.get("lbann_mini_batch_size", 1))}
    if kind == "sgd":
        settings.update(optimizer="sgd", momentum=opt.momentum)
    elif opt.adamw_weight_decay:
        settings.update(optimizer="adamw", weight_decay=opt.adamw_weight_decay)
    else:
        settings.update(optimizer="adam")
    return settings
