"""torch.nn.Module → ONNX, the entry for PyTorch users (``pip install nnbridge[torch]``).

torch stays optional: it is imported only when a module is converted.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import onnx

from ..errors import InputError
from ..ir.schema import IR_OPSET


def is_torch_module(model: Any) -> bool:
    return any(c.__module__.startswith("torch.nn") and c.__name__ == "Module" for c in type(model).__mro__)


def from_torch(module: Any, example_inputs: Sequence[Any] | None, opset: int = 18, *,
               for_training: bool = False) -> onnx.ModelProto:
    """Trace ``module`` with example tensors (as SambaFlow traces with sample tensors).

    The exporter writes ``opset`` (its best-supported one); loading upgrades it to the IR opset.
    ``for_training`` keeps every parameter as the module names it (no batch norm folded into its
    convolution, no constants precomputed from weights)."""
    if example_inputs is None:
        raise InputError("converting a torch module needs example inputs (tensors of the right shapes)")
    try:
        import torch
    except ImportError:
        raise InputError("converting a torch module needs torch; install nnbridge[torch]") from None
    buffer = io.BytesIO()
    module.eval()
    with torch.no_grad():
        torch.onnx.export(module, tuple(example_inputs), buffer, dynamo=False, opset_version=min(opset, IR_OPSET),
                          do_constant_folding=not for_training)
    return onnx.load_from_string(buffer.getvalue())
