"""Attention layers in SMAUG's frontend style: ``AttentionBase`` and ``BahdanauAttention``.

For a memory ``[batch, time, depth]`` (an RNN encoder's outputs, NTC) and a query ``[batch, depth]``:
the keys are ``memory · W_encᵀ``; Bahdanau's scores are ``tanh(keys + query · W_decᵀ) · w_alignᵀ``
(``[batch, time]``); the alignment is their softmax; the context, per batch row, is the alignment
times that row's memory (``[batch, depth]``). Node names follow SMAUG's frontend
(``<name>::mem_layer:mm``, ``<name>:query_layer``, ``<name>::score:add`` …), so files built here
equal the ones it writes.
"""

from __future__ import annotations

from ..base.errors import InputError
from ..protos.smaug import smaug_types_pb2 as pb
from . import math, tensor
from . import nn_ops as nn
from .graph import Tensor


class AttentionBase:
    """``context = Attention(memory, w_encoder, w_decoder)(query)``; subclasses define ``compute_score``."""

    def __init__(self, memory: Tensor, w_encoder: Tensor, w_decoder: Tensor, name: str = "attention"):
        if len(memory.shape.dims) != 3:
            raise InputError(f"{name}: the memory must be [batch, time, depth] (NTC), not {memory}")
        self.name = name + ":"
        self.batch_size, self.timesteps, self.depth = (int(d) for d in memory.shape.dims)
        self.w_encoder, self.w_decoder = w_encoder, w_decoder
        self.memory = memory
        self.keys = self._memory_layer(memory)

    def _memory_layer(self, memory: Tensor) -> Tensor:
        """The keys, ``[batch, time, depth]``: every time step of the memory times ``W_encᵀ``."""
        pfx = self.name + ":mem_layer:"
        rows = tensor.reshape(memory, [self.batch_size * self.timesteps, self.depth], pb.NC, name=pfx + "reshape0")
        keys = nn.mat_mul(rows, self.w_encoder, name=pfx + "mm")
        return tensor.reshape(keys, [self.batch_size, self.timesteps, self.depth], pb.NTC, name=pfx + "reshape1")

    def _query_layer(self, query: Tensor) -> Tensor:
        return nn.mat_mul(query, self.w_decoder, name=self.name + "query_layer")

    def compute_score(self, query: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} defines no score; use BahdanauAttention")

    def _compute_alignment(self, query: Tensor) -> Tensor:
        return nn.softmax(self.compute_score(self._query_layer(query)), name=self.name + "softmax")

    def __call__(self, query: Tensor) -> Tensor:
        """The context vector ``[batch, depth]`` for ``query`` ``[batch, depth]``."""
        alignment = self._compute_alignment(query)
        rows = tensor.split(alignment, self.batch_size, axis=0, name=self.name + "split")
        values = tensor.unstack(tensor.reorder(self.memory, pb.NCT), 0, name=self.name + "unstack")
        context = [nn.mat_mul(row, value, name=self.name + "mm") for row, value in zip(rows, values)]
        return tensor.concat(context, 0, name=self.name + "concat")


class BahdanauAttention(AttentionBase):
    """Additive attention (Bahdanau, Cho and Bengio, ICLR 2015): ``w_alignment`` is ``[1, depth]``."""

    def __init__(self, memory: Tensor, w_encoder: Tensor, w_decoder: Tensor, w_alignment: Tensor,
                 name: str = "bahdanau_attention"):
        super().__init__(memory, w_encoder, w_decoder, name)
        self.w_alignment = w_alignment

    def compute_score(self, query: Tensor) -> Tensor:
        pfx = self.name + ":score:"
        query = tensor.expand_dims(query, 1, name=pfx + "expand")  # [batch, 1, depth]: broadcast over time
        activations = nn.tanh(math.add(self.keys, query, name=pfx + "add"), name=pfx + "stack")
        activations = tensor.reshape(activations, [self.batch_size * self.timesteps, self.depth], pb.NC,
                                     name=pfx + "reshape0")
        scores = nn.mat_mul(activations, self.w_alignment, name=pfx + "mm")
        return tensor.reshape(scores, [self.batch_size, self.timesteps], pb.NC, name=pfx + "reshape1")
