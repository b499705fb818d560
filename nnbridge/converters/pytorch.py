"""torch.nn.Module → ONNX, the entry for PyTorch users (``pip install nnbridge[torch]``).

torch stays optional: it is imported only when a module is converted.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from typing import Any

import onnx

from ..base.errors import InputError
from ..ir.schema import IR_OPSET

#: model metadata: the framework a model came from ("torch"), so that training follows its semantics
FRAMEWORK_KEY = "nnbridge.framework"
#: model metadata: the training layers an inference export of a module left out (comma-separated
#: kinds), so that training it says so instead of training another network
LOST_LAYERS_KEY = "nnbridge.inference_export_lost"


def is_torch_module(model: Any) -> bool:
    return any(c.__module__.startswith("torch.nn") and c.__name__ == "Module" for c in type(model).__mro__)


def from_torch(module: Any, example_inputs: Sequence[Any] | None, opset: int = 18, *,
               for_training: bool = False) -> onnx.ModelProto:
    """Trace ``module`` with example tensors (as SambaFlow traces with sample tensors).

    The exporter writes ``opset`` (its best-supported one); loading upgrades it to the IR opset.
    ``for_training`` exports in torch's training mode with nothing folded, so Dropout stays and
    BatchNorm keeps its own parameters, then writes the graph in its inference form (Dropout an
    identity, BatchNorm on running statistics) — nnbridge's training form is the switch back — with
    a symbolic batch dim. The module's train/eval mode is left as it was."""
    if example_inputs is None:
        raise InputError("converting a torch module needs example inputs (tensors of the right shapes)")
    try:
        import torch
    except ImportError:
        raise InputError("converting a torch module needs torch; install nnbridge[torch]") from None
    examples = tuple(example_inputs)
    buffer = io.BytesIO()
    was_training = module.training
    options: dict[str, Any] = {"do_constant_folding": not for_training}
    if for_training:
        names = [f"input_{i}" if len(examples) > 1 else "input" for i in range(len(examples))]
        options.update(training=torch.onnx.TrainingMode.TRAINING, input_names=names,
                       dynamic_axes={name: {0: "batch"} for name in names})
    class Forward(torch.nn.Module):  # positional inputs only: torch's own layers (TransformerEncoderLayer)
        def __init__(self):               # trace their keyword defaults as tensors when exported directly
            super().__init__()
            self.inner = module

        def forward(self, *inputs):
            return self.inner(*inputs)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's deprecation and tracer notes
            if not for_training:
                module.eval()
            torch.onnx.export(Forward(), examples, buffer, dynamo=False, opset_version=min(opset, IR_OPSET),
                              **options)
    except Exception as exc:  # torch's exporter raises many kinds; the user gets one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"torch.onnx.export could not export {type(module).__name__}: {first}") from None
    finally:
        module.train(was_training)
    model = onnx.load_from_string(buffer.getvalue())
    _unprefixed(model, "inner.")
    if for_training:
        _inference_form(model)
    else:
        lost = _training_layers(module, torch)
        if lost:
            _mark(model, LOST_LAYERS_KEY, ", ".join(lost))
    _mark(model, FRAMEWORK_KEY, "torch")
    return model


def _unprefixed(model: onnx.ModelProto, prefix: str) -> None:
    """The module's own tensor names, without the wrapper's attribute."""
    renamed = {t.name: t.name[len(prefix):] for t in model.graph.initializer if t.name.startswith(prefix)}
    for tensor in model.graph.initializer:
        tensor.name = renamed.get(tensor.name, tensor.name)
    for node in model.graph.node:
        node.input[:] = [renamed.get(name, name) for name in node.input]
    for value in [*model.graph.input, *model.graph.output, *model.graph.value_info]:
        value.name = renamed.get(value.name, value.name)


def _mark(model: onnx.ModelProto, key: str, value: str) -> None:
    model.metadata_props.add(key=key, value=value)


def _training_layers(module: Any, torch: Any) -> list[str]:
    """The kinds of layers an inference export leaves out (Dropout) or folds (BatchNorm)."""
    kinds = (("Dropout", torch.nn.modules.dropout._DropoutNd), ("BatchNorm", torch.nn.modules.batchnorm._BatchNorm))
    return [name for name, cls in kinds if any(isinstance(m, cls) for m in module.modules())]


def _inference_form(model: onnx.ModelProto) -> None:
    """A training-mode export in inference form: BatchNormalization without ``training_mode`` and
    its running-statistics outputs, Dropout without its ``training_mode`` input and mask output."""
    used = {name for node in model.graph.node for name in node.input} | {o.name for o in model.graph.output}
    for node in model.graph.node:
        if node.op_type == "BatchNormalization" and not node.domain:
            kept = [a for a in node.attribute if a.name != "training_mode"]
            del node.attribute[:]
            node.attribute.extend(kept)
        elif node.op_type == "Dropout" and not node.domain:
            del node.input[2:]
        else:
            continue
        extra = [o for o in node.output[1:] if o and o in used]
        if extra:
            raise InputError(f"{node.op_type} '{node.name}': the model reads its training output '{extra[0]}'; "
                             f"nnbridge trains from the inference form, which has none")
        del node.output[1:]
