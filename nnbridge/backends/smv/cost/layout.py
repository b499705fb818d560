"""CPU reorders that SMAUG's frontend would insert (smaug-format §5.2).

SMV's conv, pooling and post-conv batch norm read and write NHWC; element-wise
kernels keep whatever layout they are given; CPU operators and graph outputs
want the layout the graph declares. Walking the steps with the *physical*
layout of every 4-D value shows where a NCHW↔NHWC Reorder (a full-tensor copy
on the CPU) is needed; a graph already in NHWC (the SMV pass pipeline, or a
SMAUG SMV file) needs none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ....ir import Layout, TensorType
from ..lowering import Step

NHWC_FAMILIES = {"conv", "pool", "bn"}


def reorder_bytes(steps: Sequence[Step], types: dict[str, TensorType], outputs: Sequence[str],
                  nbytes: Callable[[str], int]) -> dict[int, int]:
    """Bytes each step (by index) must reorder before it runs, plus graph-output reorders."""

    def declared(name: str) -> str:
        t = types.get(name)
        return "NHWC" if t is not None and t.layout is Layout.NHWC else "NCHW"

    def rank(name: str | None) -> int:
        t = types.get(name) if name else None
        return len(t.shape) if t is not None and t.shape is not None else 0

    phys: dict[str, str] = {}
    charged: dict[int, int] = {}

    def need(i: int, name: str | None, layout: str) -> None:
        if name is None or rank(name) != 4:
            return
        if phys.get(name, declared(name)) != layout:
            charged[i] = charged.get(i, 0) + nbytes(name)

    producer: dict[str, int] = {}
    for i, step in enumerate(steps):
        four_d = [n for n in step.inputs if n is not None and rank(n) == 4]
        if step.family in NHWC_FAMILIES and rank(step.inputs[0]) == 4:
            need(i, step.inputs[0], "NHWC")
            out = "NHWC"
        elif step.family == "vector":
            layouts = {phys.get(n, declared(n)) for n in four_d}
            out = layouts.pop() if len(layouts) == 1 else "NHWC"
            for n in four_d:
                need(i, n, out)
        else:
            for n in four_d:
                need(i, n, declared(n))
            out = None
        for name in step.outputs:
            if name and rank(name) == 4:
                phys[name] = out or declared(name)
                producer[name] = i
    for name in outputs:
        if rank(name) == 4 and phys.get(name, declared(name)) != declared(name) and name in producer:
            i = producer[name]
            charged[i] = charged.get(i, 0) + nbytes(name)
    return charged
