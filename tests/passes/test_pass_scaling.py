"""Every pass does work linear in the graph: counted attribute reads of nodes and values per node,
on generated graphs of two sizes, stay bounded and do not grow with the graph (counted, not timed;
the timings are ``make bench``'s bench_passes)."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

import nnbridge
from nnbridge.backends import get_backend
from nnbridge.ir.graph import Node, Value
from nnbridge.passes import PassManager

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from nnbridge.zoo.generated import generated_model  # noqa: E402 - shared with the benchmark

SMALL, LARGE = 650, 2600
MAX_READS_PER_NODE = 200  # the busiest pass today reads ~75 times per node


@functools.cache
def _reads_per_node(nodes: int, backend: str, level: int) -> dict[str, float]:
    graph = nnbridge.load(generated_model(nodes))
    count = [0]

    def counting(self, name):
        count[0] += 1
        return object.__getattribute__(self, name)

    reads: dict[str, int] = {}

    def after(name: str, _graph) -> None:
        reads[name] = reads.get(name, 0) + count[0]
        count[0] = 0

    manager = PassManager(get_backend(backend).pipeline(level), after_each=after)
    Node.__getattribute__ = Value.__getattribute__ = counting
    try:
        manager.run(graph)
    finally:
        del Node.__getattribute__, Value.__getattribute__
    return {name: n / nodes for name, n in reads.items()}


@pytest.mark.parametrize("level", [1, 3])
@pytest.mark.parametrize("backend", ["reference", "smv", "rdu"])
def test_every_pass_reads_each_node_a_bounded_number_of_times(backend, level):
    small, large = _reads_per_node(SMALL, backend, level), _reads_per_node(LARGE, backend, level)
    assert small.keys() == large.keys() and small
    for name in small:
        assert large[name] <= MAX_READS_PER_NODE, (name, large[name])
        assert large[name] <= 1.25 * small[name] + 2, f"{name}: {small[name]:.0f} → {large[name]:.0f} reads per node"
