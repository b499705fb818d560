"""The kernel registry: ``@kernel("Conv")`` registers one numpy function per op.

A kernel is ``fn(ctx, *inputs) -> array | tuple[array, ...]``: a tuple means
several outputs, a list is one sequence value; absent optional inputs arrive as
None. ``check(node)`` may return a reason to refuse a node at compile time (an
attribute value or dtype the kernel does not implement), so that unsupported
cases end in a clean ``UnsupportedOpError`` instead of a wrong answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..base.registry import Registry
from ..ir import DType, Node

KernelFn = Callable[..., Any]
CheckFn = Callable[[Node], "str | None"]


@dataclass(frozen=True)
class KernelSpec:
    op: str
    domain: str
    fn: KernelFn
    dtypes: frozenset[DType] | None = None  # accepted dtypes of input 0 (None: any)
    check: CheckFn | None = None

    def unsupported_reason(self, node: Node) -> str | None:
        if self.dtypes is not None and node.inputs and node.inputs[0] is not None:
            dtype = node.inputs[0].type.dtype
            if dtype is not None and dtype not in self.dtypes:
                return f"dtype {dtype.short} is not implemented"
        return self.check(node) if self.check is not None else None


def _load_kernels() -> None:
    from . import ops  # noqa: F401 - importing registers every kernel module


KERNELS: Registry[tuple[str, str], KernelSpec] = Registry("kernels", load=_load_kernels)


def kernel(*ops: str, domain: str = "", dtypes: Iterable[DType] | None = None,
           check: CheckFn | None = None) -> Callable[[KernelFn], KernelFn]:
    """Register ``fn`` as the kernel of each op in ``ops``."""
    accepted = frozenset(dtypes) if dtypes is not None else None
    return KERNELS.decorator(*((domain, op) for op in ops),
                             value=lambda key, fn: KernelSpec(key[1], domain, fn, accepted, check))


def get_kernel(op: str, domain: str = "") -> KernelSpec | None:
    return KERNELS.get(("" if domain == "ai.onnx" else domain, op))


def registered_ops() -> dict[tuple[str, str], KernelSpec]:
    return dict(KERNELS)



def kernel_op_names() -> set[str]:
    """Every op with a kernel, domain-qualified outside the ONNX domain ("nnbridge.Reorder")."""
    return {op if not domain else f"{domain}.{op}" for (domain, op) in KERNELS}
