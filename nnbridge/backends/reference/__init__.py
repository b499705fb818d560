"""Reference backend (numpy). Kernels live in ``kernels/``, one module per op family."""

from .backend import BACKEND, ReferenceBackend, ReferenceExecutable
from .registry import kernel

__all__ = ["BACKEND", "ReferenceBackend", "ReferenceExecutable", "kernel"]
