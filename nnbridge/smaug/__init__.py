"""Build SMAUG models in Python with SMAUG's own frontend API (``import nnbridge.smaug as sg``).

    with sg.Graph(name="my_model", backend="SMV") as graph:
        act = sg.input_data(sg.Tensor(data_layout=sg.NHWC, tensor_data=x))
        act = sg.nn.convolution(act, w, stride=[1, 1], padding="same", activation="relu")
        act = sg.nn.max_pool(act, pool_size=[2, 2], stride=[2, 2])
        act = sg.nn.mat_mul(act, fc)
    graph.print_summary(); graph.write_graph(); graph_ir = graph.to_ir()

Scripts written for SMAUG (``import smaug as sg``) run unmodified with ``python -m nnbridge.smaug
script.py`` and write the same bytes. As in SMAUG, every name of its type enums is an attribute
of the package (``sg.NHWC``, ``sg.Float16``, ``sg.AllDma``, ``sg.ReLU`` …).
"""

from __future__ import annotations

from ..protos.smaug.smaug_types_pb2 import *  # noqa: F403 - SMAUG's enum names, as sg.NHWC, sg.AllDma etc.
from . import control_flow, math, models, nn, tensor
from .control_flow import cond, merge, switch
from .graph import Graph, Node, Tensor, input_data

__all__ = ["Graph", "Node", "Tensor", "input_data", "cond", "switch", "merge", "control_flow", "math", "models", "nn",
           "tensor"]
