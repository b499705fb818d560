"""Execution targets. Backends consume ``ir.Graph`` and never import converters."""

from .base import Backend, Executable, available_backends, get_backend

__all__ = ["Backend", "Executable", "available_backends", "get_backend"]
