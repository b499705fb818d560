"""Reference backend (numpy). Kernels live in ``kernels/``, one module per op family."""

from ...kernels import kernel
from .backend import BACKEND, ReferenceBackend, ReferenceExecutable

__all__ = ["BACKEND", "ReferenceBackend", "ReferenceExecutable", "kernel"]
