"""What an LBANN experiment holds beyond the network: data readers, trainer, training algorithm,
optimizer, objective function, metrics, callbacks and the training-only layers (losses, metrics)
they use. The IR does not model them; import keeps them verbatim in the graph's metadata (text
format, so they also travel through ONNX metadata), and the LBANN writer puts them back around
the written network — an LBANN → LBANN conversion gives LBANN the same experiment to train.
"""

from __future__ import annotations

import os

from google.protobuf import text_format

from ...errors import FormatError
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
                   epochs: int, batch_size: int, val_split: float, data_file: str, classes: int,
                   nesterov: bool = False) -> None:
    """Record the experiment that trains ``graph`` as nnbridge trained it, for the LBANN writer:
    the labels (or responses) input, softmax and the loss layer on the model's output, the objective,
    a metric (categorical accuracy for classifiers), the optimizer with its hyper-parameters and a
    ``numpy_npz`` data reader for ``data_file`` (arrays ``data`` and ``labels``/``responses``)."""
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
    folder, name = os.path.split(os.path.abspath(data_file))
    reader = shell.data_reader.reader.add(name="numpy_npz", role="train", shuffle=True,
                                          data_filedir=folder + os.sep, data_filename=name,
                                          validation_fraction=val_split, fraction_of_data_to_use=1.0)
    if loss == "cross-entropy":
        reader.disable_responses, reader.num_labels = True, classes
    else:
        reader.disable_labels = True
    shell.trainer.mini_batch_size = batch_size
    graph.metadata[KEY] = text_format.MessageToString(shell)
