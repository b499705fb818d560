"""Control flow in SMAUG's frontend style: ``switch``, ``merge`` and ``cond`` (dead-tensor
semantics: a Switch forwards its input to the output its boolean predicate picks and marks
the other dead; a Merge forwards its first live input)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..protos.smaug import smaug_types_pb2 as pb
from .graph import Tensor, graph_of


def switch(input_tensor: Tensor, pred: Tensor, name: str = "switch") -> tuple[Tensor, Tensor]:
    """(output if ``pred`` is false, output if it is true); ``pred`` holds one boolean."""
    dims = list(input_tensor.shape.dims)
    when_false, when_true = graph_of(input_tensor, pred).add_node(name, pb.Switch, [input_tensor, pred], [dims] * 2,
                                                                  input_tensor.shape.layout)
    return when_false, when_true


def merge(input_tensors: Sequence[Tensor], name: str = "merge") -> Tensor:
    first = input_tensors[0]
    return graph_of(*input_tensors).add_node(name, pb.Merge, list(input_tensors), [list(first.shape.dims)],
                                             first.shape.layout)[0]


def cond(pred: Tensor, true_fn: Callable[..., Tensor | Sequence[Tensor]],
         false_fn: Callable[..., Tensor | Sequence[Tensor]], inputs: Sequence[Tensor],
         name: str = "cond") -> list[Tensor]:
    """``true_fn(*inputs)`` if ``pred`` else ``false_fn(*inputs)``: each branch gets the inputs through
    Switch nodes and the results meet in Merge nodes (true first). Unlike SMAUG's ``cond`` (whose
    branch functions take no arguments and whose external tensors are switched afterwards), the
    tensors a branch reads are passed explicitly."""
    switched = [switch(t, pred, f"{name}/switch") for t in inputs]
    results = []
    for fn, port in ((true_fn, 1), (false_fn, 0)):
        out = fn(*[pair[port] for pair in switched])
        results.append(list(out) if isinstance(out, (list, tuple)) else [out])
    return [merge([t, f], f"{name}/merge") for t, f in zip(*results)]
