"""The kernel registry: ``@kernel("Conv")`` registers one numpy function per op.

A kernel is ``fn(ctx, *inputs, *, attribute=default, ...) -> array | tuple[array, ...]``: its
positional parameters are the node's inputs (absent optional inputs arrive as None), its
keyword-only parameters are the node's attributes, named as the op's schema names them and with
the schema's defaults. A tuple means several outputs, a list is one sequence value.

The signature is checked against the schema of every op the kernel is registered for when it is
registered (at import): a keyword the schema does not define, a default other than the schema's,
or a default on a required attribute raise ``RegistrationError`` naming kernel, op and attribute,
so a misspelt attribute can never silently read as its default. A default may differ from the
schema's only when ``own_defaults`` says why (RNN's per-op activations). The evaluator binds each
node's attributes once, when it builds its plan (``KernelSpec.bind``).

``check(node, *, attribute=default, ...)`` may return a reason to refuse a node at compile time (an
attribute value or dtype the kernel does not implement), so that unsupported cases end in a clean
``UnsupportedOpError`` instead of a wrong answer; its keywords are bound and checked the same way.

``prepare(node, consts, *, attribute=default, ...)`` may return, for one node, a callable
``(ctx, *inputs)`` that the plan runs in place of the kernel: on small graphs a kernel's own
prologue (reading a constant shape input, normalising axes, working out a window's geometry)
costs more than its arithmetic, and a prepared callable does that work once, when the plan is
built. ``consts`` holds each input's value when it is a weight of the plan (None otherwise); a
callable that relies on a static shape from the IR checks it on every call and falls back to the
kernel. It must return what the kernel returns (``tests/reference/test_prepared.py``) and keep no
state of a run: one plan runs from several threads at once.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base.errors import KernelError, RegistrationError
from ..base.registry import Registry
from ..ir import DType, Node
from ..ir.schema import IR_OPSET, OpSchema, get_schema

KernelFn = Callable[..., Any]
CheckFn = Callable[..., "str | None"]
PrepareFn = Callable[..., "KernelFn | None"]

#: the value of a required attribute's binding: the node must carry it
REQUIRED = inspect.Parameter.empty
#: (attribute, the value a node without it binds, or REQUIRED) for each keyword of a function
Bindings = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class KernelSpec:
    op: str
    domain: str
    fn: KernelFn
    dtypes: frozenset[DType] | None = None  # accepted dtypes of input 0 (None: any)
    check: CheckFn | None = None
    attrs: Bindings = ()  # fn's attribute keywords
    check_attrs: Bindings = ()  # check's attribute keywords
    defined: frozenset[str] | None = None  # every attribute the op's schema defines (None: no schema)
    prepare: PrepareFn | None = None
    prepare_attrs: Bindings = ()  # prepare's attribute keywords

    def prepared(self, node: Node, consts: tuple[Any, ...]) -> KernelFn | None:
        """The node's own callable ``(ctx, *inputs)`` when the kernel prepares one (see the module's
        docstring), else None: the plan then calls ``fn`` with the bound attributes."""
        if self.prepare is None:
            return None
        return self.prepare(node, consts, **_bind(self.prepare_attrs, node))

    def bind(self, node: Node) -> dict[str, Any]:
        """The node's attributes as ``fn``'s keyword arguments; an attribute the op does not define,
        or a required one the node lacks, is a ``KernelError`` naming the node."""
        problem = self._attribute_problem(node)
        if problem:
            raise KernelError(f"node '{node.name}' ({node.op}): {problem}")
        return _bind(self.attrs, node)

    def unsupported_reason(self, node: Node) -> str | None:
        problem = self._attribute_problem(node)
        if problem:
            return problem
        if self.dtypes is not None and node.inputs and node.inputs[0] is not None:
            dtype = node.inputs[0].type.dtype
            if dtype is not None and dtype not in self.dtypes:
                return f"dtype {dtype.short} is not implemented"
        return self.check(node, **_bind(self.check_attrs, node)) if self.check is not None else None

    def _attribute_problem(self, node: Node) -> str | None:
        if self.defined is not None:
            stray = [name for name in node.attrs if name not in self.defined]
            if stray:  # e.g. Squeeze's pre-opset-13 axes attribute: honouring or ignoring it would both guess
                return f"attribute '{stray[0]}' is not defined for {self.op} at the IR opset {IR_OPSET}"
        for name, absent in self.attrs + self.check_attrs:
            if absent is REQUIRED and node.attrs.get(name) is None:
                return f"lacks its required attribute '{name}'"
        return None


def _bind(bindings: Bindings, node: Node) -> dict[str, Any]:
    attrs = node.attrs
    kwargs = {}
    for name, absent in bindings:
        value = attrs.get(name)
        kwargs[name] = absent if value is None else value
    return kwargs


def _same_default(given: Any, declared: Any) -> bool:
    """Equal as the attribute stores them: floats are float32 in an AttributeProto (0.01 is
    0.009999999776482582), lists compare element by element."""
    if isinstance(declared, float) and isinstance(given, (int, float)) and not isinstance(given, bool):
        return bool(np.float32(given) == np.float32(declared))
    if isinstance(declared, (list, tuple)) and isinstance(given, (list, tuple)):
        return len(given) == len(declared) and all(_same_default(g, d) for g, d in zip(given, declared))
    return type(given) is type(declared) and given == declared


def signature_bindings(fn: Callable[..., Any], role: str, op: str, domain: str, schema: OpSchema,
                       own_defaults: Mapping[str, str]) -> Bindings:
    """``fn``'s keyword-only parameters checked against ``schema``: what each binds when absent.
    The schema's default wins over an equal one of the signature (it is the attribute's exact value)."""
    where = _where(role, fn, op, domain)
    bindings = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind is param.VAR_KEYWORD:
            raise RegistrationError(f"{where} takes **{param.name}: name each attribute it reads as a "
                                    "keyword-only parameter")
        if param.kind is not param.KEYWORD_ONLY:
            continue
        name, given = param.name, param.default
        if name in schema.required_attrs:
            if given is not REQUIRED:
                raise RegistrationError(f"{where}: attribute '{name}' is required by the schema, so its keyword "
                                        f"takes no default (has {given!r})")
            bindings.append((name, REQUIRED))
            continue
        if name not in schema.attr_defaults:
            known = sorted(schema.attr_defaults) + sorted(schema.required_attrs)
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f" (it has {', '.join(known) or 'none'})"
            raise RegistrationError(f"{where}: keyword '{name}' is not an attribute of the op{hint}")
        if given is REQUIRED:
            raise RegistrationError(f"{where}: attribute '{name}' is optional in the schema; give its keyword "
                                    f"the schema's default ({schema.attr_defaults[name]!r})")
        declared = schema.attr_defaults[name]
        if name in own_defaults or declared is None:  # the schema states none: the kernel's reading of ONNX's text
            bindings.append((name, given))
        elif _same_default(given, declared):
            bindings.append((name, declared))
        else:
            raise RegistrationError(f"{where}: attribute '{name}' defaults to {given!r}, the schema to "
                                    f"{declared!r}; use the schema's, or say why in own_defaults=")
    return tuple(bindings)


def _where(role: str, fn: Callable[..., Any], op: str, domain: str) -> str:
    """How an error names a kernel or check: 'kernel nnbridge.kernels.ops.softmax.softmax of Softmax'."""
    target = inspect.unwrap(fn)
    return f"{role} {target.__module__}.{target.__qualname__} of {f'{domain}.{op}' if domain else op}"


def _load_kernels() -> None:
    from . import ops  # noqa: F401 - importing registers every kernel module


KERNELS: Registry[tuple[str, str], KernelSpec] = Registry("kernels", load=_load_kernels)


def kernel(*ops: str, domain: str = "", dtypes: Iterable[DType] | None = None,
           check: CheckFn | None = None, own_defaults: Mapping[str, str] | None = None,
           prepare: PrepareFn | None = None) -> Callable[[KernelFn], KernelFn]:
    """Register ``fn`` as the kernel of each op in ``ops``; ``own_defaults`` maps an attribute whose
    default deliberately differs from the schema's to the reason why; ``prepare`` makes a node's
    callable at plan-build time (the module's docstring)."""
    accepted = frozenset(dtypes) if dtypes is not None else None
    own = dict(own_defaults or {})

    def spec(key: tuple[str, str], fn: KernelFn) -> KernelSpec:
        op_domain, op = key
        schema = get_schema(op, op_domain)
        if schema is None:
            raise RegistrationError(f"{_where('kernel', fn, op, op_domain)}: the op has no schema to check its "
                                    "attributes against; register one (register_op with a schema, as "
                                    "ir/nnbridge_ops.py does)")
        attrs = signature_bindings(fn, "kernel", op, op_domain, schema, own)
        check_attrs = signature_bindings(check, "check", op, op_domain, schema, own) if check is not None else ()
        prepare_attrs = (signature_bindings(prepare, "prepare", op, op_domain, schema, own)
                         if prepare is not None else ())
        unused = sorted(set(own) - {name for name, _ in attrs + check_attrs + prepare_attrs})
        if unused:
            raise RegistrationError(f"{_where('kernel', fn, op, op_domain)}: own_defaults names "
                                    f"{', '.join(unused)}, which neither it nor its check takes")
        defined = frozenset(schema.attr_defaults) | schema.required_attrs
        return KernelSpec(op, domain, fn, accepted, check, attrs, check_attrs, defined, prepare, prepare_attrs)

    keys = [(domain, op) for op in ops]

    def wrap(fn: KernelFn) -> KernelFn:
        specs = {key: spec(key, fn) for key in keys}  # every op checked before any is registered
        return KERNELS.decorator(*keys, value=lambda key, _: specs[key])(fn)

    return wrap


def get_kernel(op: str, domain: str = "") -> KernelSpec | None:
    return KERNELS.get(("" if domain == "ai.onnx" else domain, op))


def registered_ops() -> dict[tuple[str, str], KernelSpec]:
    return dict(KERNELS)



def kernel_op_names() -> set[str]:
    """Every op with a kernel, domain-qualified outside the ONNX domain ("nnbridge.Reorder")."""
    return {op if not domain else f"{domain}.{op}" for (domain, op) in KERNELS}
