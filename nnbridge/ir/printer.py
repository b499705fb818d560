"""A readable text form of a graph, in the spirit of NNVM's ``graph.ir()``.

    graph lenet (%x: float32[1,1,28,28] NCHW) {
      %conv1 = Conv(%x, $w1[20,1,5,5]) {kernel_shape=[5,5]}  # float32[1,20,24,24] NCHW
      ...
      return %prob
    }

``%`` marks activations, ``$`` marks initializers (constants).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .graph import Graph, Value


def _ref(v: Value | None) -> str:
    if v is None:
        return "_"
    if v.const is not None:
        return f"${v.name}[{','.join(map(str, v.const.shape))}]"
    return f"%{v.name}"


def _attr(value: Any, indent: str) -> str:
    if hasattr(value, "nodes") and hasattr(value, "initializers"):  # a subgraph (graph.py imports this module)
        return "\n" + format_graph(value, indent + "    ") + indent + "  "
    if isinstance(value, np.ndarray):
        if value.size <= 8:
            return f"tensor{value.tolist()}"
        return f"tensor<{value.dtype}[{','.join(map(str, value.shape))}]>"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)) and len(value) > 16:
        return f"[{', '.join(map(str, value[:16]))}, …]"
    return repr(value) if isinstance(value, str) else str(value).replace(" ", "")


def format_graph(graph: Graph, indent: str = "") -> str:
    lines = []
    ins = ", ".join(f"%{v.name}: {v.type}" for v in graph.inputs)
    lines.append(f"{indent}graph {graph.name} ({ins}) {{")
    for node in graph.nodes:
        outs = ", ".join(f"%{o.name}" for o in node.outputs)
        args = ", ".join(_ref(v) for v in node.inputs)
        op = f"{node.domain}.{node.op}" if node.domain else node.op
        attrs = ", ".join(f"{k}={_attr(v, indent)}" for k, v in sorted(node.attrs.items()))
        attrs = f" {{{attrs}}}" if attrs else ""
        types = ", ".join(str(o.type) for o in node.outputs)
        lines.append(f"{indent}  {outs} = {op}({args}){attrs}  # {types}")
    lines.append(f"{indent}  return {', '.join(_ref(v) for v in graph.outputs)}")
    lines.append(f"{indent}}}")
    return "\n".join(lines) + "\n"
