"""Op schemas: arity, attribute defaults and fusion pattern kind of every IR op.

Standard ops take arity and attribute defaults from ``onnx.defs`` at the IR opset
(one source of truth, not a copy). nnbridge-domain ops (layout ``Reorder``, fused
groups, SMAUG's ``Repeat`` …) register their own schema with ``register_schema``.
The pattern kinds follow NNVM/TVM (specs/passes.md §1) and drive fusion and the
RDU partitioner.
"""

from __future__ import annotations

import enum
import functools
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import onnx.defs
from onnx import helper

from ..base.errors import NNBridgeError
from ..base.registry import Registry

if TYPE_CHECKING:
    from .graph import Node

#: The one ONNX opset whose semantics IR ops follow: the newest that
#: ``onnx.version_converter`` reaches for every test model and that onnxruntime
#: 1.31 (our oracle) still runs, so every exported model can be cross-checked.
IR_OPSET = 26

#: Domain of nnbridge's own ops.
NNBRIDGE_DOMAIN = "nnbridge"
#: ONNX's optimizer ops (Momentum, Adam, Adagrad): a training step's weight update
TRAINING_DOMAIN = "ai.onnx.preview.training"
#: nnbridge's own training ops (a fused training-form BatchNorm and its backward): only training
#: graphs hold them, which the reference backend and the RDU run; no file format writes them
NNBRIDGE_TRAINING_DOMAIN = "nnbridge.training"


class PatternKind(enum.IntEnum):
    """Relay's TOpPattern values (specs/passes.md §1)."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMWISE_FUSABLE = 4
    TUPLE = 7
    OPAQUE = 8


@dataclass(frozen=True)
class OpSchema:
    name: str
    domain: str = ""
    min_inputs: int = 0
    max_inputs: int = 2**31
    min_outputs: int = 1
    max_outputs: int = 2**31
    attr_defaults: dict[str, Any] = field(default_factory=dict)
    required_attrs: frozenset[str] = frozenset()
    doc: str = ""

    def check_node(self, node: Node) -> None:
        """Arity and required attributes (what a pass or a file could get wrong)."""
        n_in = len(node.inputs)
        while n_in and node.inputs[n_in - 1] is None:
            n_in -= 1
        if not self.min_inputs <= n_in <= self.max_inputs:
            raise NNBridgeError(
                f"node '{node.name}' ({node.op}) has {n_in} inputs; "
                f"{self.name} takes {self.min_inputs}..{self.max_inputs}"
            )
        if not self.min_outputs <= len(node.outputs) <= self.max_outputs:
            raise NNBridgeError(
                f"node '{node.name}' ({node.op}) has {len(node.outputs)} outputs; "
                f"{self.name} makes {self.min_outputs}..{self.max_outputs}"
            )
        missing = sorted(a for a in self.required_attrs if a not in node.attrs)
        if missing:
            raise NNBridgeError(f"node '{node.name}' ({node.op}) lacks its required attribute(s) {', '.join(missing)}")


CUSTOM_SCHEMAS: Registry[tuple[str, str], OpSchema] = Registry("schemas")


def register_schema(schema: OpSchema) -> OpSchema:
    """Register a non-ONNX op (normally in the ``nnbridge`` domain)."""
    caller = sys._getframe(1)
    return CUSTOM_SCHEMAS.register((schema.domain, schema.name), schema,
                                   origin=f"{caller.f_globals.get('__name__')}:{caller.f_lineno}")


@functools.cache
def _onnx_schema(op: str, domain: str) -> OpSchema | None:
    try:
        s = onnx.defs.get_schema(op, IR_OPSET, domain)
    except onnx.defs.SchemaError:
        try:  # ops newer than the IR opset, or of other domains (ai.onnx.ml …)
            s = onnx.defs.get_schema(op, domain)
        except onnx.defs.SchemaError:
            return None
    defaults: dict[str, Any] = {}
    required = set()
    for name, a in s.attributes.items():
        if a.required:
            required.add(name)
        elif a.default_value is not None and a.default_value.type != 0:
            defaults[name] = helper.get_attribute_value(a.default_value)
            if isinstance(defaults[name], bytes):
                defaults[name] = defaults[name].decode()
        else:
            defaults[name] = None
    return OpSchema(
        name=op,
        domain=domain,
        min_inputs=s.min_input,
        max_inputs=s.max_input,
        min_outputs=s.min_output,
        max_outputs=s.max_output,
        attr_defaults=defaults,
        required_attrs=frozenset(required),
        doc=(s.doc or "").strip().split("\n")[0],
    )


def get_schema(op: str, domain: str = "") -> OpSchema | None:
    """The schema of ``op`` (None for ops nobody registered)."""
    domain = "" if domain == "ai.onnx" else domain
    if (domain, op) in CUSTOM_SCHEMAS:
        return CUSTOM_SCHEMAS[(domain, op)]
    if domain in (NNBRIDGE_DOMAIN, NNBRIDGE_TRAINING_DOMAIN):
        return None
    return _onnx_schema(op, domain)
