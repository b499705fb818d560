"""One-node ONNX models for kernel tests, and running them on the reference backend."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

import nnbridge
from nnbridge.ir import DType


def node_model(op, inputs, attrs=None, outputs=1, inits=(), opset=21):
    """A one-node model; ``inputs`` are (name, array) pairs or None (absent optional
    input); names in ``inits`` become initializers. Returns (model, feeds)."""
    graph_inputs, initializers, feeds = [], [], {}
    for item in inputs:
        if item is None:
            continue
        name, array = item[0], np.asarray(item[1])
        if name in inits:
            initializers.append(numpy_helper.from_array(array, name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(name, DType.from_numpy(array.dtype).onnx, array.shape))
            feeds[name] = array
    out_names = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op, ["" if x is None else x[0] for x in inputs], out_names, **(attrs or {}))
    graph = helper.make_graph([node], op.lower(), graph_inputs,
                              [helper.make_value_info(n, onnx.TypeProto()) for n in out_names], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return onnx.shape_inference.infer_shapes(model), feeds


def run_ours(model, feeds) -> list:
    """Outputs of ``model`` on the reference backend (no passes), in graph order."""
    exe = nnbridge.compile(model, passes=[])
    out = exe.run(feeds)
    return [out[n] for n in exe.output_names]
