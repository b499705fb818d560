"""Functional simulation: the reference backend's kernels on bf16-stored tensors.

Each op runs its reference kernel in fp32 (contractions accumulate in fp32 because the
operands are float32 arrays holding bf16 values); results are rounded to bf16 where the
RDU stores them — at kernel outputs — while values inside a fused kernel stay fp32.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ...base.errors import KernelError, NNBridgeError, Unsupported, UnsupportedOpError
from ...ir import NNBRIDGE_DOMAIN, TRAINING_DOMAIN, Graph, Node
from ...kernels import KernelContext, get_kernel, unsupported_nodes
from ...passes.autodiff import PHASES_KEY
from .numerics import round_bf16


def unsupported(graph: Graph) -> list[Unsupported]:
    """Nodes the functional simulator cannot run (fused groups run their bodies)."""
    bad = []
    for item in unsupported_nodes(graph):
        if item.op == "Fused" and item.domain == NNBRIDGE_DOMAIN:
            continue  # its body nodes are listed on their own by graph.walk()
        bad.append(item)
    return bad


class FunctionalSim:
    """Runs share it: a run's values live in its ``run`` call (several threads may run at once);
    ``set_tensors`` (a training step) changes what the next runs see."""

    def __init__(self, graph: Graph, stored: Iterable[str]):
        self.graph = graph
        self.stored = frozenset(stored)  # values rounded to bf16 when produced
        self.weights = {name: round_bf16(array) for name, array in graph.initializers.items()}
        # fp32 master copies: the optimizer op of a training program reads and writes these (mixed
        # precision as SambaFlow trains: bf16 forward and backward, fp32 weight update)
        self.master = {name: np.asarray(array, np.float32) for name, array in graph.initializers.items()
                       if np.asarray(array).dtype.kind == "f"}
        # the optimizer phase runs in fp32 on the masters: its op and what prepares its operands
        # (AdamW's decay, torch's Adam scaling of gradients and states)
        phases = json.loads(graph.metadata.get(PHASES_KEY, "{}"))
        self.fp32 = {id(node) for node in graph.nodes if node.domain == TRAINING_DOMAIN
                     or (node.outputs and all(phases.get(o.name) == "opt" for o in node.outputs))}
        self.keep = {v.name for v in graph.outputs}
        last_use: dict[str, int] = {}
        for i, node in enumerate(graph.nodes):
            for v in list(node.inputs) + node.captured():
                if v is not None:
                    last_use[v.name] = i
        self.last_use = last_use
        bad = unsupported(graph)
        if bad:
            raise UnsupportedOpError("the rdu backend (functional simulation)", bad)
        # (node, context, kernel, its bound attributes, whether it runs subgraphs: those see the run's values)
        self.steps = [(node, KernelContext(node), spec, spec.bind(node) if spec is not None else {},
                       bool(node.subgraphs()))
                      for node in graph.nodes for spec in [get_kernel(node.op, node.domain)]]

    def set_tensors(self, tensors: Mapping[str, np.ndarray]) -> None:
        """New values for the graph's tensors (a training step's updates): fp32 kept as masters,
        bf16 where the RDU stores them."""
        for name, array in tensors.items():
            self.master[name] = np.asarray(array, np.float32)
            self.weights[name] = round_bf16(array)

    def run(self, feeds: Mapping[str, Any]) -> dict[str, Any]:
        env: dict[str, Any] = dict(self.weights)
        env.update({name: round_bf16(value) for name, value in feeds.items()})
        for i, (node, ctx, spec, kwargs, scoped) in enumerate(self.steps):
            update = id(node) in self.fp32
            args = [(self.master.get(v.name, env[v.name]) if update else env[v.name]) if v is not None else None
                    for v in node.inputs]
            try:
                result = self._call(node, ctx.bound(env) if scoped else ctx, spec, args, kwargs)
            except NNBridgeError:
                raise
            except Exception as exc:
                raise KernelError(f"node '{node.name}' ({node.op}) failed: {type(exc).__name__}: {exc}") from exc
            if not isinstance(result, tuple):
                result = (result,)
            for out, value in zip(node.outputs, result):
                env[out.name] = round_bf16(value) if out.name in self.stored and not update else value
            for v in node.inputs:
                if v is not None and self.last_use.get(v.name) == i and v.name not in self.keep \
                        and v.name not in self.weights:
                    env.pop(v.name, None)
        return {v.name: env[v.name] for v in self.graph.outputs}

    @staticmethod
    def _call(node: Node, ctx: KernelContext, spec, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if spec is None and node.op == "Fused" and node.domain == NNBRIDGE_DOMAIN:
            body: Graph = node.attrs["body"]
            values = ctx.run_graph(body, {v.name: a for v, a in zip(body.inputs, args)})
            return tuple(values)
        return spec.fn(ctx, *args, **kwargs)
