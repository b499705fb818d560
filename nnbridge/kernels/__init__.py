"""The kernel layer: one numpy implementation per op, and the evaluator that runs a graph with them.

It sits between the IR and everything that computes values: constant folding (a pass), the
reference backend, and the SMV and RDU functional simulators all call this public API.
"""

from .evaluator import KernelContext, Plan, compiled_plan, unsupported_nodes
from .registry import KERNELS, KernelSpec, get_kernel, kernel, kernel_op_names, registered_ops

__all__ = ["KERNELS", "KernelContext", "KernelSpec", "Plan", "compiled_plan", "get_kernel", "kernel",
           "kernel_op_names", "registered_ops", "unsupported_nodes"]
