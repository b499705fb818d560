"""Control flow in SMAUG's frontend style: ``switch``, ``merge`` and ``cond`` (dead-tensor
semantics: a Switch forwards its input to the output its boolean predicate picks and marks
the other dead; a Merge forwards its first live input)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..protos.smaug import smaug_types_pb2 as pb
from .graph import Graph, Tensor, graph_of

#: the Switch output each branch reads
PORTS = {"true": 1, "false": 0}


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


def cond(predication: Tensor, true_fn: Callable[..., Tensor | Sequence[Tensor]],
         false_fn: Callable[..., Tensor | Sequence[Tensor]], inputs: Sequence[Tensor] | str | None = None,
         name: str = "cond") -> list[Tensor]:
    """``true_fn()`` if ``predication`` else ``false_fn()``, as SMAUG's ``cond``: each branch is built in a
    nested graph, every tensor a branch reads from outside it goes through a Switch on
    ``predication``, and the results meet in Merge nodes (true first). With ``inputs`` (an nnbridge
    form), the branch functions take those tensors as arguments, each switched once."""
    if isinstance(inputs, str):  # SMAUG's signature: cond(predication, true_fn, false_fn, name)
        inputs, name = None, inputs
    if inputs is not None:
        switched = [switch(t, predication, f"{name}/switch") for t in inputs]
        results = []
        for fn, port in ((true_fn, 1), (false_fn, 0)):
            results.append(_listed(fn(*[pair[port] for pair in switched])))
        return [merge([t, f], f"{name}/merge") for t, f in zip(*results)]
    outer = graph_of(predication)
    name = outer.names.unique(name)
    results = []
    for branch, fn in (("true", true_fn), ("false", false_fn)):
        with Graph(name=f"{name}_{branch}_branch", backend=outer.backend, mem_policy=outer.mem_policy) as sub:
            results.append(_listed(fn()))
            _switch_external_inputs(sub, predication, PORTS[branch])
    return [merge([t, f]) for t, f in zip(*results)]


def _listed(out) -> list[Tensor]:
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _switch_external_inputs(graph: Graph, predication: Tensor, port: int) -> None:
    """Route every input a branch's operators read from outside the branch (Data outputs included)
    through a new Switch node, keeping the output of ``port``."""
    nodes = [n for n in graph.nodes if n.op != pb.Data]
    internal = {t.name for n in nodes for t in n.outputs}
    for node in nodes:
        if node.op == pb.Switch:
            continue
        for i, t in enumerate(node.inputs):
            if t.name not in internal:
                node.update_input(switch(t, predication)[port], i)
