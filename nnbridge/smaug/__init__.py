"""Build SMAUG models in Python, in the style of SMAUG's own frontend (``import nnbridge.smaug as sg``).

    with sg.Graph(name="my_model", backend="SMV") as g:
        act = sg.input_data(sg.Tensor(data_layout=sg.NHWC, tensor_data=x), g)
        act = sg.nn.convolution(act, w, stride=[1, 1], padding="same", activation="relu")
        act = sg.nn.max_pool(act, pool_size=[2, 2], stride=[2, 2])
        act = sg.nn.mat_mul(act, fc)
    g.print_summary(); g.write_graph(); graph_ir = g.to_ir()

Builder state lives in the ``Graph`` object (no global active graph): ops find their graph through
their input tensors, and ``input_data`` takes the graph explicitly.
"""

from __future__ import annotations

from ..protos.smaug.smaug_types_pb2 import (  # noqa: F401 - SMAUG's layout/type names, as sg.NHWC etc.
    CN,
    NC,
    NCHW,
    NCT,
    NHWC,
    NTC,
    Float16,
    Float32,
    N,
    X,
)
from . import control_flow, math, models, nn, tensor
from .graph import Graph, Tensor, input_data

__all__ = ["Graph", "Tensor", "input_data", "control_flow", "math", "models", "nn", "tensor", "NCHW", "NHWC", "NC",
           "CN", "NCT", "NTC", "N", "X", "Float16", "Float32"]
