"""Recurrent layers in SMAUG's frontend style: ``LSTM`` and ``BidirectionalLSTM``, unrolled over time.

One step, with ``W`` and ``U`` the two weights (``[4·units, depth]`` NC; gate order i, f, c, o):
``z = x·Wᵀ + h·Uᵀ``; ``i, f, o = σ(zᵢ), σ(z_f), σ(zₒ)``; ``c = f·c + i·act(z_c)``; ``h = o·act(c)``.
The states start as zero Data tensors named ``<layer>:/h`` and ``<layer>:/c``; node names follow
SMAUG's frontend (``<layer>:step<k>:mm_f`` …, the recurrent product is named ``mm_u``), so files
built here equal the ones it writes.
"""

from __future__ import annotations

import numpy as np

from ..base.errors import InputError
from ..protos.smaug import smaug_types_pb2 as pb
from . import math, tensor
from . import nn_ops as nn
from .graph import Tensor


class LSTM:
    """``outputs, state = LSTM([W, U], name="lstm0")(inputs)``: inputs are one NTC tensor
    ``[batch, time, depth]`` or a list of NC ``[batch, depth]`` steps; outputs one NC tensor per
    step (or, with ``concat_output``, one NTC tensor); state the final cell state."""

    def __init__(self, weight_tensors, activation: str = "tanh", activation_params: dict | None = None,
                 name: str = "lstm"):
        if len(weight_tensors) != 2:
            raise InputError(f"LSTM '{name}': weight_tensors must be [kernel, recurrent_kernel], "
                             f"not {len(weight_tensors)} tensors")
        if activation not in nn.ACTIVATION_OPS:
            raise InputError(f"LSTM '{name}': unknown activation '{activation}'; choose from "
                             f"{', '.join(nn.ACTIVATION_OPS)}")
        self.name = name + ":"
        self.kernel, self.recurrent_kernel = weight_tensors
        self.activation = nn.ACTIVATION_OPS[activation]
        self.activation_params = dict(activation_params or {})
        self.h, self.c = self._zero_state("h"), self._zero_state("c")

    def _zero_state(self, which: str) -> Tensor:
        if self.kernel.tensor_data is None:
            raise InputError(f"LSTM '{self.name[:-1]}': the kernel needs tensor_data")
        units = self.kernel.dims(0 if self.kernel.shape.layout == pb.NC else 1) // 4
        return Tensor(name=f"{self.name}/{which}", data_layout=pb.NC,
                      tensor_data=np.zeros((1, units), dtype=self.kernel.tensor_data.dtype))

    def __call__(self, input_tensor, concat_output: bool = False):
        if isinstance(input_tensor, list):
            steps = input_tensor
        else:
            steps = tensor.unstack(input_tensor, 1, name=self.name + "unstack")
        outputs = []
        state = self.c
        for i, x in enumerate(steps):
            output, state = self.step(x, i)
            outputs.append(output)
        if concat_output:
            return concat_steps(outputs, self.name), state
        return outputs, state

    def step(self, input_tensor: Tensor, timestep: int) -> tuple[Tensor, Tensor]:
        """One timestep: (h, c)."""
        pfx = f"{self.name}step{timestep}:"
        z = nn.mat_mul(input_tensor, self.kernel, name=pfx + "mm_f")
        z = math.add(z, nn.mat_mul(self.h, self.recurrent_kernel, name="mm_u"), name=pfx + "add_z")
        zi, zf, zc, zo = tensor.split(z, num_or_size_splits=4, axis=1)
        i = nn.sigmoid(zi, name=pfx + "sigmoid_i")
        f = nn.sigmoid(zf, name=pfx + "sigmoid_f")
        c = math.add(math.mul(f, self.c, name=pfx + "mul_f"),
                     math.mul(i, self.activation(zc, **self.activation_params, name=pfx + "act0"),
                              name=pfx + "mul_i"), name=pfx + "add_c")
        o = nn.sigmoid(zo, name=pfx + "sigmoid_o")
        h = math.mul(o, self.activation(c, **self.activation_params, name=pfx + "act1"), name=pfx + "mul_h")
        self.c, self.h = c, h
        return h, c


class BidirectionalLSTM:
    """``outputs, fwd_state, bwd_state = BidirectionalLSTM([Wf, Uf], [Wb, Ub])(inputs)``: step k of the
    outputs concatenates the forward LSTM's output k with the backward LSTM's output k, where the
    backward LSTM reads the steps in reverse order (its outputs are not re-reversed, as in SMAUG)."""

    def __init__(self, fwd_weight_tensors, bwd_weight_tensors, activation: str = "tanh",
                 activation_params: dict | None = None, name: str = "bidir_lstm"):
        self.name = name + ":"
        self.fwd_lstm = LSTM(fwd_weight_tensors, activation, activation_params, name=self.name + "fwd_lstm")
        self.bwd_lstm = LSTM(bwd_weight_tensors, activation, activation_params, name=self.name + "bwd_lstm")

    def __call__(self, input_tensor, concat_output: bool = False):
        fwd_outputs, fwd_state = self.fwd_lstm(input_tensor)
        if isinstance(input_tensor, list):
            reverse = input_tensor[::-1]
        else:
            reverse = tensor.unstack(input_tensor, 1)[::-1]
        bwd_outputs, bwd_state = self.bwd_lstm(reverse)
        outputs = [tensor.concat([f, b], 1, name=self.name + "concat") for f, b in zip(fwd_outputs, bwd_outputs)]
        if concat_output:
            return concat_steps(outputs, self.name), fwd_state, bwd_state
        return outputs, fwd_state, bwd_state


def concat_steps(outputs: list[Tensor], prefix: str) -> Tensor:
    """NC steps → one NTC tensor ``[batch, time, depth]``."""
    steps = [tensor.expand_dims(o, 1, name=prefix + "expand_dims") for o in outputs]
    return tensor.concat(steps, 1, name=prefix + "concat")
